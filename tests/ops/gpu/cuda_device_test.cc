// The DeviceApi contract (device_contract_test.cc) against the real CUDA runtime. Where there
// is no GPU (or no CUDA in this build) it prints why and exits 77, which ctest shows as
// skipped; on a GPU every case must pass.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "ops/cuda/cuda_backend.h"
#include "tests/ops/gpu/device_contract.h"

namespace kolo::gpu::testing {
namespace {
std::unique_ptr<DeviceApi> g_device;
}  // namespace

DeviceApi& DeviceUnderTest() {
  return *g_device;
}

}  // namespace kolo::gpu::testing

int main(int argc, char** argv) {
  using namespace kolo;
  StatusOr<std::unique_ptr<gpu::DeviceApi>> api = gpu::NewCudaDeviceApi();
  if (!api.ok()) {
    std::printf("SKIPPED: no CUDA device (%s)\n", api.status().message().c_str());
    return 77;
  }
  StatusOr<int> count = (*api)->DeviceCount();
  if (!count.ok() || *count == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                count.ok() ? "cudaGetDeviceCount found 0" : count.status().message().c_str());
    return 77;
  }
  gpu::testing::g_device = std::move(api).value();
  return Catch::Session().run(argc, argv);
}
