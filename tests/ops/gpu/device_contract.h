// The DeviceApi contract: test cases (tests/ops/gpu/device_contract_test.cc) that every
// backend must pass, compiled once per backend. Each test binary defines DeviceUnderTest():
// the simulator's binary returns a SimDevice; the real CUDA backend's returns the CUDA one
// (and exits 77, SKIPPED, where there is no GPU).
#pragma once

#include "ops/gpu/device_api.h"

namespace kolo::gpu::testing {

// The backend under test, created on first use and shared by every test case of the binary.
DeviceApi& DeviceUnderTest();

}  // namespace kolo::gpu::testing
