// The handle form of an async op allocates nothing beyond the callback form (kolo/handle.h
// promises handles are cheap), and a small blocking allreduce on the fast path stays within
// its allocation budget (docs/PERFORMANCE.md, run M: allocations cost a small op ~10% of its
// time). Counts the calling thread's allocations with a global operator new, so it is its own
// program, and it is not built under sanitizers, which replace the allocator themselves.
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

TEST_CASE("A blocking 4 KiB allreduce on the fast path allocates at most 20 times",
          "[runtime][fast_path]") {
  // The caller runs its op itself when kolo's thread is idle (BackgroundLoop::Drive), so its
  // thread's count is the op's whole path on this rank: validation, the queue's entry, the
  // round, the collective, the callback: 16 on 2026-11-28 (f412ac8; a uprobe on malloc
  // counted ~19 per op in a whole rank's process, kolo's own thread included).
  // The least count over many ops, so that an op handed to kolo's thread (a peer that was
  // late) does not hide what the path itself allocates.
  constexpr long kBudget = 20;
  Watchdog watchdog("fast-path allocations", std::chrono::seconds(60));
  LocalJob job(2);
  std::vector<long> least(2, -1);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::vector<float> v(1024, 1.0f);
    const TensorView view = Floats(v);
    for (int i = 0; i < 400; ++i) {
      const long before = tls_allocations;
      Status s = rt.Allreduce("grad", view, view);
      const long used = tls_allocations - before;
      if (!s.ok()) return s.ToString();
      // The first ops go through the controller (the name is not cached yet).
      if (i >= 50 && (least[rt.rank()] < 0 || used < least[rt.rank()])) least[rt.rank()] = used;
    }
    return "";
  });
  for (const std::string& failure : failures) CHECK(failure == "");
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": least allocations of one op on the calling thread " << least[r]);
    CHECK(least[r] > 0);  // the op's entry at least: the counter sees this path
    CHECK(least[r] <= kBudget);
  }
}
