// Test support of the GPU runtime tests (tests/runtime/gpu_runtime_*_test.cc): a rank's device
// tensor on its simulated GPU (DeviceTensor) and a checked small allreduce through the runtime.
// Threading: each rank's thread uses its own.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kolo/kolo.h"
#include "tests/support/sim_gpu/sim_backends.h"
#include "tests/support/tensor_values.h"

namespace kolo::gpu_runtime_test {

using kolo::gpu::sim::FromDevice;
using kolo::gpu::sim::SimDevice;
using kolo::gpu::sim::ToDevice;

// Device memory of one rank, freed when it goes.
class DeviceTensor {
 public:
  DeviceTensor(SimDevice* device, const std::vector<uint8_t>& bytes, DataType dtype,
               std::vector<int64_t> shape)
      : device_(device), dtype_(dtype), shape_(std::move(shape)) {
    StatusOr<void*> ptr = ToDevice(*device_, bytes);
    status_ = ptr.status();
    if (ptr.ok()) ptr_ = *ptr;
  }
  ~DeviceTensor() {
    if (ptr_ != nullptr) device_->Free(ptr_).IgnoreError();  // the test checked what it needs
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  const Status& status() const { return status_; }
  TensorView view() const { return TensorView{ptr_, dtype_, shape_, Device::Cuda(0)}; }
  StatusOr<std::vector<uint8_t>> Read() const {
    return FromDevice(*device_, ptr_, view().num_bytes());
  }

 private:
  SimDevice* const device_;
  const DataType dtype_;
  const std::vector<int64_t> shape_;
  void* ptr_ = nullptr;
  Status status_;
};

inline std::string Fail(const std::string& what, const Status& s) {
  return what + ": " + s.ToString();
}

// A sum of 10 floats on `device`'s cuda:0, checked; "" when right.
inline std::string SmallAllreduce(Runtime& rt, SimDevice* device, const std::string& name) {
  if (Status s = device->SetDevice(0); !s.ok()) return Fail("SetDevice", s);
  std::vector<uint8_t> in =
      kolo::testing::MakeInput(DataType::kFloat32, 10, rt.rank(), ReduceOp::kSum);
  DeviceTensor t(device, in, DataType::kFloat32, {10});
  if (Status s = rt.Allreduce(name, t.view(), t.view()); !s.ok()) return Fail(name, s);
  StatusOr<std::vector<uint8_t>> got = t.Read();
  if (!got.ok()) return Fail(name + " download", got.status());
  return kolo::testing::CheckAllreduce(*got, DataType::kFloat32, 10, rt.size(), ReduceOp::kSum);
}

}  // namespace kolo::gpu_runtime_test
