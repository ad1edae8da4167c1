#include "ops/cuda/cuda_backend.h"

#if KOLO_HAVE_CUDA
#include "ops/cuda/cuda_device_api.h"
#endif

namespace kolo::gpu {

bool CudaBuilt() {
  return KOLO_HAVE_CUDA != 0;
}

StatusOr<std::unique_ptr<DeviceApi>> NewCudaDeviceApi() {
#if KOLO_HAVE_CUDA
  return std::unique_ptr<DeviceApi>(std::make_unique<CudaDeviceApi>());
#else
  return FailedPrecondition(
      "kolo was built without CUDA (KOLO_WITH_CUDA=OFF or no CUDA toolkit found at configure "
      "time); rebuild with the CUDA toolkit installed for GPU tensors");
#endif
}

}  // namespace kolo::gpu
