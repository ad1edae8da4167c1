// The handle form of an async op allocates nothing beyond the callback form (kolo/handle.h
// promises handles are cheap). Counts the calling thread's allocations with a global
// operator new, so it is its own program, and it is not built under sanitizers, which replace
// the allocator themselves.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <future>
#include <new>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

// Allocations made by the calling thread, for the test that the handle form allocates nothing
// beyond the callback form.
namespace {
thread_local long tls_allocations = 0;
}  // namespace

void* operator new(size_t bytes) {
  ++tls_allocations;
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
// The array forms too, so that every new and delete pair goes through the same allocator.
void* operator new[](size_t bytes) {
  return operator new(bytes);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}

namespace {

TensorView Floats(std::vector<float>& v) {
  return {v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::Cpu()};
}

}  // namespace

TEST_CASE("The handle form allocates nothing beyond the callback form", "[runtime][handle]") {
  Watchdog watchdog("handle allocations", std::chrono::seconds(60));
  LocalJob job(1);
  Runtime& rt = job.rank(0);
  std::vector<float> v(16, 1.0f);
  const TensorView view = Floats(v);
  const std::string name = "counted";
  long with_callback = -1, with_handle = -1;
  for (int trial = 0; trial < 20; ++trial) {
    {
      std::promise<void> done;
      const long before = tls_allocations;
      Status s =
          rt.AllreduceAsync(name, view, view, {}, [p = &done](const Status&) { p->set_value(); });
      const long used = tls_allocations - before;
      REQUIRE(s.ok());
      done.get_future().get();
      if (with_callback < 0 || used < with_callback) with_callback = used;
    }
    {
      const long before = tls_allocations;
      StatusOr<Handle> h = rt.AllreduceAsync(name, view, view);
      const long used = tls_allocations - before;
      REQUIRE(h.ok());
      REQUIRE(synchronize(*h).ok());
      if (with_handle < 0 || used < with_handle) with_handle = used;
    }
  }
  CHECK(with_callback > 0);  // the op's own: its entry, its name
  CHECK(with_handle == with_callback);
}
