// The torch.distributed backend's entry points in kolo.torch._C (module.cc calls
// RegisterC10d); python/kolo/torch/distributed.py is their only caller.
#pragma once

#include <pybind11/pybind11.h>

namespace kolo::torch_ext {

void RegisterC10d(pybind11::module_& module);

}  // namespace kolo::torch_ext
