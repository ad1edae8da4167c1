// CompletionQueue: the GPU path's completion thread (DESIGN.md §4). The GPU executor enqueues
// an op's device work on kolo's stream, records an event after it and pushes an Item here; this
// thread polls the items' events in order, checks the communicator's health between polls
// (NCCL's asynchronous error), enforces KOLO_TIMEOUT_SECONDS, reports each op's timeline
// phases as measured by its events, and runs each op's `done` under no lock.
//
// Failure: the first device error, unhealthy communicator or timeout calls `on_fatal` exactly
// once (the executor aborts its communicator there, which releases kernels spinning on a dead
// peer), fails that op's `done` with the error, and holds the ops behind it until Interrupt
// says with which root cause they fail (the background loop aborts the job and interrupts the
// executor, so every op fails once with the same message).
//
// Threading: Push and Interrupt from any thread; the items' callbacks (`done`, `release`, the
// phase observer) run on the queue's own thread. Destruction waits for that thread, after
// failing what is left with a shutdown status.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/config/config_table.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/mutex.h"
#include "ops/gpu/device_api.h"

namespace kolo::gpu {

class CompletionQueue {
 public:
  struct Config {
    double timeout_seconds =
        DefaultOptions()
            .timeout_seconds;  // KOLO_TIMEOUT_SECONDS: one op's longest time on the device
    const Clock* clock = SteadyClock::Get();
    // Between two polls of a pending event the thread sleeps this long (the GPU needs no CPU
    // to make progress; a short sleep keeps the thread off the training's cores).
    std::chrono::microseconds poll_interval{50};
  };

  // One phase of an op on the timeline: between two timing events of its stream.
  struct Phase {
    const char* name;  // "MEMCPY_IN_FUSION_BUFFER", "NCCL_ALLREDUCE", ...
    EventHandle start;
    EventHandle end;
  };

  struct Item {
    std::string what;      // "allreduce 'grad/w1' (3 tensors, 12 MiB)", for messages
    EventHandle finished;  // completes when every output holds its result
    std::vector<Phase> phases;
    PhaseObserver* observer = nullptr;  // may be null
    Executor::Done done;
    // Runs after `done` (or after the op failed): returns the op's events and buffers.
    std::function<void()> release;
  };

  // `health` (may be empty) is polled between event queries: non-OK means the communicator
  // failed. `on_fatal` runs once, on this queue's thread, at the first failure.
  CompletionQueue(DeviceApi* device, const Config& config, std::function<Status()> health,
                  std::function<void(const Status&)> on_fatal, Logger logger);
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  void Push(Item item);
  // Every op pending now or pushed later fails with `why` (the first Interrupt wins).
  void Interrupt(const Status& why);
  // Ops pushed and not completed yet.
  size_t pending() const;

 private:
  void Run();
  // Polls `item` until it completed, failed or was interrupted; returns its status. Holds mu_
  // on entry and return, not while it queries the device.
  Status Await(const Item& item) KOLO_REQUIRES(mu_);
  void Finish(Item& item, const Status& status);
  void ReportPhases(const Item& item);

  DeviceApi* const device_;
  const Config config_;
  const std::function<Status()> health_;
  const std::function<void(const Status&)> on_fatal_;
  const Logger logger_;

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Item> items_ KOLO_GUARDED_BY(mu_);  // the front is polled
  Status interrupted_ KOLO_GUARDED_BY(mu_);
  bool failed_ KOLO_GUARDED_BY(mu_) = false;  // on_fatal ran; items wait for Interrupt
  bool stopping_ KOLO_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace kolo::gpu
