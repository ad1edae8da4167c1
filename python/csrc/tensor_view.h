// torch::Tensor -> kolo::TensorView: the zero-copy adapter of kolo.torch.
//
// Threading: pure functions over the tensor's metadata; callable from any thread, without the
// GIL. The view borrows the tensor's memory: the caller keeps the tensor alive until the op
// completed (handle_table.h does).
#pragma once

#include <torch/extension.h>

#include <optional>
#include <string>

#include "kolo/types.h"

namespace kolo::torch_ext {

// kolo's dtype for a torch dtype; nullopt for one kolo has no counterpart of (complex, ...).
std::optional<DataType> ToKoloType(at::ScalarType type);

// A view of `tensor`, which must be contiguous, with a dtype kolo knows, on the CPU or a CUDA
// device. Otherwise an error message naming `what` (the op and the tensor name).
std::optional<TensorView> ToView(const at::Tensor& tensor, const std::string& what,
                                 std::string* error);

}  // namespace kolo::torch_ext
