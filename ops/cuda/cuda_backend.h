// The one place that says which real GPU backends this build has (ops/cuda/backend_factory.cc
// is the only file with a KOLO_HAVE_CUDA condition). Everything else of the GPU path works on
// the DeviceApi it returns, or on the simulator in tests.
//
// Thread-safe.
#pragma once

#include <memory>

#include "ops/gpu/device_api.h"

namespace kolo::gpu {

// Whether this build has the CUDA device backend (KOLO_WITH_CUDA found a toolkit).
bool CudaBuilt();

// The CUDA runtime behind DeviceApi. Fails with FailedPrecondition in a build without CUDA,
// saying how to get one. Creating it touches no device: DeviceCount tells whether one works.
StatusOr<std::unique_ptr<DeviceApi>> NewCudaDeviceApi();

}  // namespace kolo::gpu
