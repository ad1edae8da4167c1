// A rank of the fault suite (fault_suite_test.cc), started as a real process from KOLO_*
// variables. It submits one op no other rank submits (so it stays pending at the controller),
// then runs steps of three concurrent allreduces until one fails, and reports how kolo behaved,
// one fact per line. <ns> is the worker's steady clock (CLOCK_MONOTONIC) in nanoseconds, so
// the test measures from the moment it sent a signal.
//   INIT <ns> <status>             init() failed (exit 2)
//   ready <ns>                     the first step succeeded
//   DONE <ns> <name>               an op of the failing step that still succeeded
//   FAILED <ns> <name> <status>    an op of the failing step that failed, with kolo's message
//   LONELY <ns> <status>           the op only this rank submitted
//   LATER <ms> <status>            an enqueue after the failure, and how long it took
//   SHUTDOWN <ms> <status>         shutdown() and how long it took
//   GONE <ns>                      shutdown() returned: the background thread has stopped
// Exit codes: 3 after a failure (expected), 2 if init failed, 0 if nothing failed in 60 s.
// FAULT_WORKER_IN_SET=1: the steps run in a process set of every rank, made after init (on one
// host, over the set's own shared memory); the lonely op stays in the global set.
// FAULT_WORKER_OP=alltoall: the steps' ops are alltoalls of the same sizes, even splits.
// FAULT_WORKER_OP=p2p: the steps' ops are point-to-point (kolo/p2p.h), a ring exchange: each rank
// receives 4 MiB and 64 B from the rank before it and sends as much to the rank after it.
// FAULT_WORKER_OP=barrier: each step is one barrier, alone in flight, so that from the second
// step on the fast path's rounds decide it; the lonely op is submitted after the failure instead
// (one pending before would send every barrier to the controller), and must be refused.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "kolo/p2p.h"
#include "worker_lines.h"

namespace {

using Clock = std::chrono::steady_clock;

long long Nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Op {
  std::string name;
  std::vector<float> data;
  std::promise<std::pair<Clock::time_point, kolo::Status>> done;
  bool alltoall = false;
  std::vector<float> received;  // an alltoall's output
  int p2p = 0;                  // 1: send to the next rank, -1: receive from the one before
  bool barrier = false;
};

using kolo::test::Print;
using kolo::test::View;

// Enqueues `op`; its promise is fulfilled by the callback (or at once if enqueue failed).
void Enqueue(Op& op) {
  auto done = [&op](const kolo::Status& s) { op.done.set_value({Clock::now(), s}); };
  const int n = kolo::size();
  const int64_t tag = static_cast<int64_t>(op.data.size());
  kolo::Status queued =
      op.barrier   ? kolo::barrier_async(done)
      : op.p2p > 0 ? kolo::send_async(View(op.data), (kolo::rank() + 1) % n, tag, {}, done)
      : op.p2p < 0
          ? kolo::recv_async(View(op.data), (kolo::rank() + n - 1) % n, tag, nullptr, {}, done)
      : op.alltoall ? kolo::alltoall_async(
                          op.name, View(op.data), {},
                          [&op](const std::vector<int64_t>& shape) -> void* {
                            op.received.resize(static_cast<size_t>(shape[0]));
                            return op.received.data();
                          },
                          nullptr, done)
                    : kolo::allreduce_async(op.name, View(op.data), View(op.data), {}, done);
  if (!queued.ok()) op.done.set_value({Clock::now(), queued});
}

}  // namespace

int main() {
  kolo::Status status = kolo::init();
  if (!status.ok()) {
    Print("INIT " + std::to_string(Nanos(Clock::now())) + " " + status.ToString());
    return 2;
  }
  std::optional<kolo::ProcessSetScope> in_set;
  if (const char* in = std::getenv("FAULT_WORKER_IN_SET"); in != nullptr && in[0] == '1') {
    std::vector<int> everyone;
    for (int r = 0; r < kolo::size(); ++r) everyone.push_back(r);
    kolo::StatusOr<int> set = kolo::add_process_set(everyone);
    if (!set.ok()) {
      Print("INIT " + std::to_string(Nanos(Clock::now())) + " " + set.status().ToString());
      return 2;
    }
    in_set.emplace(*set);
  }
  const char* kind = std::getenv("FAULT_WORKER_OP");
  const bool barriers = kind != nullptr && std::string(kind) == "barrier";
  Op lonely{"lonely/" + std::to_string(kolo::rank()), std::vector<float>(4, 1.0f), {}};
  if (!barriers) {
    kolo::ProcessSetScope global(0);
    Enqueue(lonely);
  }

  const Clock::time_point started = Clock::now();
  bool failed = false;
  for (int step = 0; !failed && MsSince(started) < 60000; ++step) {
    const bool p2p = kind != nullptr && std::string(kind) == "p2p";
    std::vector<Op> ops(p2p ? 4 : barriers ? 1 : 3);
    if (barriers) {
      ops[0] = Op{"kolo.barrier", {}, {}};
      ops[0].barrier = true;
    } else if (p2p) {
      ops[0] = Op{"recv/big", std::vector<float>(1 << 20, 1.0f), {}};
      ops[1] = Op{"send/big", std::vector<float>(1 << 20, 1.0f), {}};
      ops[2] = Op{"recv/small", std::vector<float>(16, 1.0f), {}};
      ops[3] = Op{"send/small", std::vector<float>(16, 1.0f), {}};
      for (size_t i = 0; i < ops.size(); ++i) ops[i].p2p = i % 2 == 0 ? -1 : 1;
    } else {
      ops[0] = Op{"grad/big", std::vector<float>(1 << 20, 1.0f), {}};
      ops[1] = Op{"grad/mid", std::vector<float>(1 << 16, 1.0f), {}};
      ops[2] = Op{"grad/small", std::vector<float>(16, 1.0f), {}};
    }
    for (Op& op : ops) {
      op.alltoall = kind != nullptr && std::string(kind) == "alltoall";
      // Even splits: a multiple of the ranks' count of rows.
      if (op.alltoall) op.data.resize(op.data.size() / 16 * 16 * kolo::size(), 1.0f);
    }
    std::vector<std::future<std::pair<Clock::time_point, kolo::Status>>> results;
    for (Op& op : ops) results.push_back(op.done.get_future());
    for (Op& op : ops) Enqueue(op);
    std::vector<std::string> lines;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (results[i].wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
        Print("HUNG " + ops[i].name);  // the test fails on this; exit so it need not wait
        std::fflush(stdout);
        std::_Exit(4);
      }
      auto [when, s] = results[i].get();
      const std::string t = std::to_string(Nanos(when));
      lines.push_back(s.ok() ? "DONE " + t + " " + ops[i].name
                             : "FAILED " + t + " " + ops[i].name + " " + s.ToString());
      failed = failed || !s.ok();
    }
    // Barriers: ready once the rounds decide them (from the second step on).
    if (!failed && step == (barriers ? 3 : 0))
      Print("ready " + std::to_string(Nanos(Clock::now())));
    if (failed) {
      for (const std::string& line : lines) Print(line);
    }
  }
  if (!failed) {
    (void)kolo::shutdown();
    return 0;
  }
  auto lonely_result = lonely.done.get_future();
  if (barriers) Enqueue(lonely);
  if (lonely_result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    Print("HUNG " + lonely.name);
    std::_Exit(4);
  }
  auto [lonely_when, lonely_status] = lonely_result.get();
  Print("LONELY " + std::to_string(Nanos(lonely_when)) + " " + lonely_status.ToString());

  Clock::time_point t0 = Clock::now();
  std::vector<float> later(4, 1.0f);
  kolo::Status enqueued =
      kolo::allreduce_async("later", View(later), View(later), {}, [](const kolo::Status&) {});
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.1f", MsSince(t0));
  Print(std::string("LATER ") + ms + " " + enqueued.ToString());
  t0 = Clock::now();
  kolo::Status down = kolo::shutdown();
  std::snprintf(ms, sizeof(ms), "%.1f", MsSince(t0));
  Print(std::string("SHUTDOWN ") + ms + " " + down.ToString());
  Print("GONE " + std::to_string(Nanos(Clock::now())));
  return 3;
}
