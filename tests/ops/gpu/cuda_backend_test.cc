// The real CUDA backend on whatever machine this runs: in a build with CUDA, DeviceCount either
// finds devices or says in CUDA's words why there is none, at once; never a hang or a crash.
// (On the machines kolo is developed on there is a CUDA toolkit and no driver: error 35.)
#include "ops/cuda/cuda_backend.h"

#include <catch2/catch.hpp>
#include <chrono>

using namespace kolo;

TEST_CASE("Without a usable driver the CUDA backend says so at once, in CUDA's words",
          "[gpu][cuda]") {
  StatusOr<std::unique_ptr<gpu::DeviceApi>> api = gpu::NewCudaDeviceApi();
  if (!gpu::CudaBuilt()) {
    REQUIRE_FALSE(api.ok());
    CHECK(api.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(api.status().message(), Catch::StartsWith("kolo was built without CUDA"));
    return;
  }
  REQUIRE(api.ok());
  const auto start = std::chrono::steady_clock::now();
  StatusOr<int> count = (*api)->DeviceCount();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  if (count.ok()) {
    CHECK(*count >= 0);
    return;
  }
  INFO(count.status().ToString());
  CHECK(count.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(count.status().message(),
             Catch::StartsWith("no usable CUDA driver (cudaGetDeviceCount: cudaError"));
  CHECK(api.value()->name() == "cuda");
}
