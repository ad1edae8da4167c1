// The DeviceApi contract (device_contract.h): what the GPU path relies on of any backend.
#include "tests/ops/gpu/device_contract.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <vector>

using namespace kolo;
using namespace kolo::gpu;

namespace {

// Device memory freed at the end of the scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    StatusOr<void*> p = testing::DeviceUnderTest().Malloc(bytes);
    REQUIRE(p.ok());
    ptr_ = *p;
  }
  ~DeviceBuffer() { testing::DeviceUnderTest().Free(ptr_).IgnoreError(); }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

struct Stream {
  Stream() {
    StatusOr<StreamHandle> s = testing::DeviceUnderTest().CreateStream(true);
    REQUIRE(s.ok());
    handle = *s;
  }
  ~Stream() { testing::DeviceUnderTest().DestroyStream(handle).IgnoreError(); }
  StreamHandle handle = nullptr;
};

struct Event {
  explicit Event(bool timing = false) {
    StatusOr<EventHandle> e = testing::DeviceUnderTest().CreateEvent(timing);
    REQUIRE(e.ok());
    handle = *e;
  }
  ~Event() { testing::DeviceUnderTest().DestroyEvent(handle).IgnoreError(); }
  EventHandle handle = nullptr;
};

std::vector<float> Iota(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST_CASE("Device memory is device memory, and only the range it was allocated with",
          "[gpu][device]") {
  DeviceApi& dev = testing::DeviceUnderTest();
  REQUIRE(dev.SetDevice(0).ok());
  DeviceBuffer buffer(1000);
  CHECK(dev.CheckDevicePointer(buffer.get(), 1000, 0).ok());
  CHECK(dev.CheckDevicePointer(static_cast<char*>(buffer.get()) + 100, 900, 0).ok());
  CHECK(dev.CheckDevicePointer(buffer.get(), 1001, 0).code() == StatusCode::kInvalidArgument);
  std::vector<char> host(16);
  CHECK(dev.CheckDevicePointer(host.data(), 16, 0).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A host dereference of device memory faults, as on a GPU", "[gpu][device]") {
  DeviceBuffer buffer(64);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    signal(SIGSEGV, SIG_DFL);  // the test framework's handler would report it as a failure
    volatile const char* p = static_cast<const char*>(buffer.get());
    _exit(p[0] == 42 ? 1 : 2);  // must not get here
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
}

TEST_CASE("Copies of every kind move the bytes, in stream order, complete at their event",
          "[gpu][device]") {
  DeviceApi& dev = testing::DeviceUnderTest();
  const size_t n = GENERATE(size_t{0}, size_t{1}, size_t{1021}, size_t{1} << 18);
  const std::vector<float> in = Iota(n, 1.0f);
  std::vector<float> out(n, -1.0f);
  const size_t bytes = n * sizeof(float);
  DeviceBuffer a(bytes), b(bytes);
  Stream s;
  Event done;
  REQUIRE(dev.MemcpyAsync(a.get(), in.data(), bytes, CopyKind::kHostToDevice, s.handle).ok());
  REQUIRE(dev.MemcpyAsync(b.get(), a.get(), bytes, CopyKind::kDeviceToDevice, s.handle).ok());
  REQUIRE(dev.MemcpyAsync(out.data(), b.get(), bytes, CopyKind::kDeviceToHost, s.handle).ok());
  REQUIRE(dev.RecordEvent(done.handle, s.handle).ok());
  const Status synced = dev.SynchronizeEvent(done.handle);
  INFO(synced.ToString());
  REQUIRE(synced.ok());
  StatusOr<bool> complete = dev.QueryEvent(done.handle);
  REQUIRE(complete.ok());
  CHECK(*complete);
  CHECK(out == in);
}

TEST_CASE("A batched copy fills and drains a fusion buffer", "[gpu][device]") {
  DeviceApi& dev = testing::DeviceUnderTest();
  const std::vector<float> x = Iota(100, 0.0f), y = Iota(37, 1000.0f);
  std::vector<float> x_out(100), y_out(37);
  DeviceBuffer fused((100 + 37) * sizeof(float));
  char* base = static_cast<char*>(fused.get());
  Stream s;
  Event done;
  REQUIRE(dev.MemcpyBatchAsync({{base, x.data(), 400}, {base + 400, y.data(), 148}},
                               CopyKind::kHostToDevice, s.handle)
              .ok());
  REQUIRE(dev.MemcpyBatchAsync({{y_out.data(), base + 400, 148}, {x_out.data(), base, 400}},
                               CopyKind::kDeviceToHost, s.handle)
              .ok());
  REQUIRE(dev.RecordEvent(done.handle, s.handle).ok());
  REQUIRE(dev.SynchronizeEvent(done.handle).ok());
  CHECK(x_out == x);
  CHECK(y_out == y);
}

TEST_CASE("A stream waits for another stream's event before its later work", "[gpu][device]") {
  DeviceApi& dev = testing::DeviceUnderTest();
  const size_t n = 1 << 16;
  const std::vector<float> in = Iota(n, 5.0f);
  std::vector<float> out(n, 0.0f);
  DeviceBuffer a(n * sizeof(float)), b(n * sizeof(float));
  Stream producer, consumer;
  Event written, done;
  REQUIRE(
      dev.MemcpyAsync(a.get(), in.data(), n * 4, CopyKind::kHostToDevice, producer.handle).ok());
  REQUIRE(dev.RecordEvent(written.handle, producer.handle).ok());
  REQUIRE(dev.StreamWaitEvent(consumer.handle, written.handle).ok());
  REQUIRE(
      dev.MemcpyAsync(b.get(), a.get(), n * 4, CopyKind::kDeviceToDevice, consumer.handle).ok());
  REQUIRE(
      dev.MemcpyAsync(out.data(), b.get(), n * 4, CopyKind::kDeviceToHost, consumer.handle).ok());
  REQUIRE(dev.RecordEvent(done.handle, consumer.handle).ok());
  REQUIRE(dev.SynchronizeEvent(done.handle).ok());
  CHECK(out == in);
}

TEST_CASE("An event never recorded is complete; memset zeroes device memory", "[gpu][device]") {
  DeviceApi& dev = testing::DeviceUnderTest();
  Event fresh;
  StatusOr<bool> q = dev.QueryEvent(fresh.handle);
  REQUIRE(q.ok());
  CHECK(*q);
  const std::vector<float> ones(64, 1.0f);
  std::vector<float> out(64, 1.0f);
  DeviceBuffer a(256);
  Stream s;
  Event done(/*timing=*/true), start(/*timing=*/true);
  REQUIRE(dev.RecordEvent(start.handle, s.handle).ok());
  REQUIRE(dev.MemcpyAsync(a.get(), ones.data(), 256, CopyKind::kHostToDevice, s.handle).ok());
  REQUIRE(dev.MemsetAsync(a.get(), 0, 256, s.handle).ok());
  REQUIRE(dev.MemcpyAsync(out.data(), a.get(), 256, CopyKind::kDeviceToHost, s.handle).ok());
  REQUIRE(dev.RecordEvent(done.handle, s.handle).ok());
  REQUIRE(dev.SynchronizeEvent(done.handle).ok());
  CHECK(out == std::vector<float>(64, 0.0f));
  StatusOr<float> ms = dev.ElapsedMs(start.handle, done.handle);
  REQUIRE(ms.ok());
  CHECK(*ms >= 0.0f);
}

TEST_CASE("A copy whose pointers do not match its kind fails at once, in CUDA's words",
          "[gpu][device]") {
  DeviceApi& dev = testing::DeviceUnderTest();
  DeviceBuffer a(16);
  std::vector<char> host(16);
  Stream s;
  const Status wrong = dev.MemcpyAsync(host.data(), a.get(), 16, CopyKind::kHostToDevice, s.handle);
  CHECK(wrong.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(wrong.message(), Catch::Contains("cudaErrorInvalidValue"));
  const Status host_as_device =
      dev.MemcpyAsync(a.get(), host.data(), 16, CopyKind::kDeviceToDevice, s.handle);
  CHECK(host_as_device.code() == StatusCode::kInvalidArgument);
}
