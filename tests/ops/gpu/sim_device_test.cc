// What only the simulator promises (its fault injection and its slowness on demand), and the
// binding of the DeviceApi contract to it.
#include "tests/support/sim_gpu/sim_device.h"

#include <catch2/catch.hpp>
#include <vector>

#include "tests/ops/gpu/device_contract.h"

using namespace kolo;
using namespace kolo::gpu;
using namespace std::chrono_literals;

namespace kolo::gpu::testing {

DeviceApi& DeviceUnderTest() {
  static sim::SimDevice device(sim::SimDevice::Options{2, size_t{1} << 30, 0us, false});
  return device;
}

}  // namespace kolo::gpu::testing

TEST_CASE("Without a driver every call fails as CUDA's runtime does (error 35)", "[gpu-sim]") {
  sim::SimDevice::Options options;
  options.no_driver = true;
  sim::SimDevice dev(options);
  StatusOr<int> count = dev.DeviceCount();
  REQUIRE_FALSE(count.ok());
  CHECK(count.status().code() == StatusCode::kUnavailable);
  CHECK(count.status().message() ==
        "no usable CUDA driver (cudaGetDeviceCount: cudaErrorInsufficientDriver (35): CUDA driver "
        "version is insufficient for CUDA runtime version)");
  CHECK(dev.Malloc(16).status().message() ==
        "cudaMalloc: cudaErrorInsufficientDriver (35): CUDA driver version is insufficient for "
        "CUDA runtime version");
}

TEST_CASE("Allocations past the device's memory fail with out of memory; freeing makes room",
          "[gpu-sim]") {
  sim::SimDevice::Options options;
  options.memory_per_device = 1 << 20;
  sim::SimDevice dev(options);
  StatusOr<void*> a = dev.Malloc(768 << 10);
  REQUIRE(a.ok());
  StatusOr<void*> b = dev.Malloc(512 << 10);
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().message() == "cudaMalloc: cudaErrorMemoryAllocation (2): out of memory");
  REQUIRE(dev.Free(*a).ok());
  StatusOr<void*> c = dev.Malloc(512 << 10);
  REQUIRE(c.ok());
  CHECK(dev.Free(*c).ok());
  CHECK(dev.Free(*c).code() == StatusCode::kInvalidArgument);  // twice
}

TEST_CASE("Devices are per host thread and allocations remember theirs", "[gpu-sim]") {
  sim::SimDevice::Options options;
  options.device_count = 2;
  sim::SimDevice dev(options);
  REQUIRE(dev.SetDevice(1).ok());
  StatusOr<void*> on1 = dev.Malloc(64);
  REQUIRE(on1.ok());
  CHECK(dev.CheckDevicePointer(*on1, 64, 1).ok());
  CHECK(dev.CheckDevicePointer(*on1, 64, 0).message() ==
        "device memory of cuda:1, expected cuda:0");
  int other_thread_device = -1;
  std::thread([&] { other_thread_device = *dev.GetDevice(); }).join();
  CHECK(other_thread_device == 0);
  CHECK(dev.SetDevice(2).message() ==
        "cudaSetDevice: cudaErrorInvalidDevice (101): invalid device ordinal");
  CHECK(dev.Free(*on1).ok());
}

TEST_CASE("With a delay per operation, reading before the event shows stale data", "[gpu-sim]") {
  sim::SimDevice::Options options;
  options.op_delay = 20ms;
  sim::SimDevice dev(options);
  std::vector<float> in(256, 3.0f), out(256, 0.0f);
  StatusOr<void*> a = dev.Malloc(1024);
  REQUIRE(a.ok());
  StatusOr<StreamHandle> s = dev.CreateStream(false);
  StatusOr<EventHandle> e = dev.CreateEvent(false);
  REQUIRE((s.ok() && e.ok()));
  REQUIRE(dev.MemcpyAsync(*a, in.data(), 1024, CopyKind::kHostToDevice, *s).ok());
  REQUIRE(dev.MemcpyAsync(out.data(), *a, 1024, CopyKind::kDeviceToHost, *s).ok());
  REQUIRE(dev.RecordEvent(*e, *s).ok());
  CHECK(out == std::vector<float>(256, 0.0f));  // not yet: the copies are queued
  StatusOr<bool> q = dev.QueryEvent(*e);
  REQUIRE(q.ok());
  CHECK_FALSE(*q);
  REQUIRE(dev.SynchronizeEvent(*e).ok());
  CHECK(out == in);
  CHECK(dev.DestroyEvent(*e).ok());
  CHECK(dev.DestroyStream(*s).ok());
  CHECK(dev.Free(*a).ok());
}

TEST_CASE("Memory freed under queued work is an illegal address, reported at the event",
          "[gpu-sim]") {
  sim::SimDevice::Options options;
  options.op_delay = 20ms;
  sim::SimDevice dev(options);
  std::vector<float> in(16, 1.0f);
  StatusOr<void*> a = dev.Malloc(64);
  StatusOr<StreamHandle> s = dev.CreateStream(false);
  StatusOr<EventHandle> e = dev.CreateEvent(false);
  REQUIRE((a.ok() && s.ok() && e.ok()));
  REQUIRE(dev.MemcpyAsync(*a, in.data(), 64, CopyKind::kHostToDevice, *s).ok());
  REQUIRE(dev.RecordEvent(*e, *s).ok());
  REQUIRE(dev.Free(*a).ok());
  const Status failed = dev.SynchronizeEvent(*e);
  CHECK(failed.message() ==
        "cudaMemcpyAsync: cudaErrorIllegalAddress (700): an illegal memory access was "
        "encountered");
  // The stream stays failed, as a CUDA context does after an illegal address.
  REQUIRE(dev.RecordEvent(*e, *s).ok());
  CHECK(dev.SynchronizeEvent(*e).message() == failed.message());
  // As cudaEventDestroy, destroying returns at once: a marker and a wait still queued on the
  // failed stream keep the event alive until they ran (ASan checks this in CI).
  REQUIRE(dev.RecordEvent(*e, *s).ok());
  REQUIRE(dev.StreamWaitEvent(*s, *e).ok());
  REQUIRE(dev.DestroyEvent(*e).ok());
  CHECK(dev.QueryEvent(*e).status().message() ==
        "cudaEventQuery: cudaErrorInvalidResourceHandle (400): invalid resource handle");
  CHECK(dev.DestroyStream(*s).ok());  // runs the queued marker and wait first
}

TEST_CASE("Re-recording an event replaces what it captured", "[gpu-sim]") {
  sim::SimDevice::Options options;
  options.op_delay = 30ms;
  sim::SimDevice dev(options);
  StatusOr<StreamHandle> slow = dev.CreateStream(false);
  StatusOr<StreamHandle> idle = dev.CreateStream(false);
  StatusOr<EventHandle> e = dev.CreateEvent(false);
  REQUIRE((slow.ok() && idle.ok() && e.ok()));
  StatusOr<void*> a = dev.Malloc(4);
  REQUIRE(a.ok());
  REQUIRE(dev.MemsetAsync(*a, 0, 4, *slow).ok());
  REQUIRE(dev.RecordEvent(*e, *slow).ok());
  StatusOr<bool> busy = dev.QueryEvent(*e);
  REQUIRE(busy.ok());
  CHECK_FALSE(*busy);
  REQUIRE(dev.SynchronizeEvent(*e).ok());
  REQUIRE(dev.RecordEvent(*e, *idle).ok());
  REQUIRE(dev.SynchronizeEvent(*e).ok());
  CHECK(dev.Free(*a).ok());
}
