// Tests of transport/shm/single_copy_probe.h with thread-ranks in this process (the same process
// id for all, which cross-memory attach allows): every rank may, so all agree on single copy;
// a rank that does not try (configured off, or auto where it does not pay), or whose
// thread a seccomp filter denies cross-memory attach (as a container's profile would), makes
// every rank agree on no, naming it and why; a failed sync fails the probe.
#include "transport/shm/single_copy_probe.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/cross_memory_attach.h"
#include "tests/support/rank_threads.h"
#include "tests/support/watchdog.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using kolo::testing::RunOnRanks;

// What the plane gives the probe, in this process: the words and a barrier as the sync point.
class Board {
 public:
  explicit Board(int n) : n_(n), words_(n) {}

  ProbeWords* words(int r) { return &words_[r]; }

  // Every rank's sync; fails after 10 s (a rank that never comes) or once `broken`.
  Status Sync() {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return Aborted("sync broken");
    const int generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::Ok();
    }
    if (!cv_.wait_for(lock, 10s, [&] { return generation_ != generation || broken_; })) {
      return DeadlineExceeded("sync timed out");
    }
    return broken_ ? Aborted("sync broken") : Status::Ok();
  }

  void Break() {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    cv_.notify_all();
  }

 private:
  const int n_;
  std::vector<ProbeWords> words_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int generation_ = 0;
  bool broken_ = false;
};

// Runs the probe on n thread-ranks; `setup(rank)` runs first on each rank's thread and says
// whether that rank tries (kProbeNone) or why not.
std::vector<StatusOr<ProbeOutcome>> Probe(int n, const std::function<ProbeRefusal(int)>& setup) {
  Board board(n);
  std::vector<StatusOr<ProbeOutcome>> outcomes(n, Internal("not run"));
  RunOnRanks(n, [&](int rank) {
    const ProbeRefusal skip = setup(rank);
    outcomes[rank] = ProbeSingleCopy(
        rank, n, skip, [&](int r) { return board.words(r); }, [&] { return board.Sync(); });
  });
  return outcomes;
}

TEST_CASE("ranks that may all reach each other's memory agree on single copy",
          "[transport][shm][unit]") {
  const int n = GENERATE(1, 2, 3, 4);
  kolo::testing::Watchdog watchdog("single copy probe, all allowed", 60s);
  if (!kolo::testing::CrossMemoryAttachWorks()) {
    WARN("process_vm_readv is refused in this environment: single copy is not tested here");
    return;
  }
  for (const StatusOr<ProbeOutcome>& outcome : Probe(n, [](int) { return kProbeNone; })) {
    REQUIRE(outcome.status().ToString() == "OK");
    CHECK(outcome->single_copy);
    CHECK(outcome->refusal == "");
    CHECK(outcome->pids == std::vector<pid_t>(n, getpid()));
  }
}

TEST_CASE("one rank that will not or may not makes every rank agree on no, naming it and why",
          "[transport][shm][unit]") {
  const int n = GENERATE(2, 3, 4);
  const int refuser = n - 1;
  kolo::testing::Watchdog watchdog("single copy probe, one refuses", 60s);
  SECTION("it does not try (KOLO_SHM_SINGLE_COPY=off)") {
    for (const StatusOr<ProbeOutcome>& outcome :
         Probe(n, [&](int rank) { return rank == refuser ? kProbeOff : kProbeNone; })) {
      REQUIRE(outcome.status().ToString() == "OK");
      CHECK_FALSE(outcome->single_copy);
      CHECK(outcome->refusal_kind == kProbeOff);
      CHECK(outcome->refusal ==
            "rank " + std::to_string(refuser) + " has KOLO_SHM_SINGLE_COPY=off");
    }
  }
  SECTION("it does not try (auto, and two ranks sharing a core)") {
    for (const StatusOr<ProbeOutcome>& outcome :
         Probe(n, [&](int rank) { return rank == refuser ? kProbeNotChosen : kProbeNone; })) {
      REQUIRE(outcome.status().ToString() == "OK");
      CHECK_FALSE(outcome->single_copy);
      CHECK(outcome->refusal_kind == kProbeNotChosen);
      CHECK(outcome->refusal == "rank " + std::to_string(refuser) +
                                    " leaves it off: KOLO_SHM_SINGLE_COPY=auto leaves it off "
                                    "for two ranks sharing a core");
    }
  }
  SECTION("a seccomp filter denies it process_vm_readv and process_vm_writev") {
    if (!kolo::testing::CrossMemoryAttachWorks()) {
      WARN("process_vm_readv is refused in this environment: single copy is not tested here");
      return;
    }
    bool denied = true;
    const auto outcomes = Probe(n, [&](int rank) {
      if (rank == refuser) denied = kolo::testing::DenyCrossMemoryAttach();
      return kProbeNone;
    });
    REQUIRE(denied);
    for (const StatusOr<ProbeOutcome>& outcome : outcomes) {
      REQUIRE(outcome.status().ToString() == "OK");
      CHECK_FALSE(outcome->single_copy);
      CHECK(outcome->refusal_kind == kProbeRead);
      // It tries rank 0 first; the others reach it (its memory is not what the filter guards).
      CHECK(outcome->refusal == "rank " + std::to_string(refuser) +
                                    " could not read rank 0's memory: not permitted (Operation "
                                    "not permitted (EPERM); another user, Yama's ptrace_scope or "
                                    "a seccomp filter)");
    }
  }
}

TEST_CASE("a sync that fails fails the probe", "[transport][shm][unit]") {
  kolo::testing::Watchdog watchdog("single copy probe, broken sync", 60s);
  Board board(2);
  board.Break();
  const StatusOr<ProbeOutcome> outcome = ProbeSingleCopy(
      0, 2, kProbeNone, [&](int r) { return board.words(r); }, [&] { return board.Sync(); });
  CHECK(outcome.status() == Aborted("sync broken"));
}

}  // namespace
}  // namespace kolo::transport
