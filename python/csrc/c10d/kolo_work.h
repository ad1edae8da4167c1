// KoloWork: the c10d::Work of one collective or point-to-point op of kolo's torch.distributed
// backend (kolo_backend.h, peer_ops.h). It completes from kolo's callback: the callback first
// runs the op's finisher (copies into the caller's output tensors, checks of what arrived), then
// records the outcome, wakes waiters and completes the future DDP's communication hooks chain on.
// Waits go through the op's kolo::Handle (which the callback completes last), so they spin
// briefly the way kolo's own waits do (KOLO_WAIT_SPIN_US) before they sleep.
//
// A wait past its timeout ends the kolo job on every rank (EndJobAfterTimeout), as NCCL's
// watchdog aborts the communicator: the op then fails on every rank, so that no rank goes on as
// if it had or had not happened (docs/TORCH-DISTRIBUTED.md, "Timeouts").
//
// Threading: Complete runs once, on kolo's background thread or on a thread driving the op;
// every other method may be called from any thread. wait() releases the GIL if its caller holds
// it and is bounded by the op's timeout (the process group's unless the call gave one).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "kolo/handle.h"
#include "kolo/status.h"

namespace kolo::torch_ext {

// What every collective of one process group shares: whether a mismatch has desynchronised the
// group (the collectives after it would be named differently on different ranks, so they must
// fail instead of waiting for partners that never come).
class GroupHealth {
 public:
  void Break(const std::string& why);
  // Empty while healthy; else what broke the group.
  std::string broken() const;

 private:
  std::atomic<bool> broken_{false};
  mutable std::mutex mu_;
  std::string why_;  // guarded by mu_
};

// A failed kolo::Status as the exception torch's own backends raise for the same situation:
// c10::DistBackendError (torch.distributed.DistBackendError, a RuntimeError) when the job
// failed (a rank lost, a deadline passed, kolo shut down), c10::Error (RuntimeError) when only
// this op did (ranks disagreed, a bad argument). `what` names the op.
std::exception_ptr ToException(const Status& status, const std::string& what);

// After a wait of `timeout` for `handle`'s op (`what`, e.g. "allreduce #3 of process group
// '0'") ran out: ends the kolo job on every rank (kolo::abort_job; the controller's verdict
// names the ranks that had not submitted the pending ops) and waits, at most as long again
// (and at least 2 s), for the op to settle. Returns the DistBackendError to throw, which
// carries the verdict; null when the op completed after all (it did run on every rank that
// submitted it; the job is over all the same). Releases nothing: call it without the GIL.
std::exception_ptr EndJobAfterTimeout(const Handle& handle, const std::string& what,
                                      std::chrono::milliseconds timeout);

class KoloWork : public c10d::Work {
 public:
  struct Spec {
    int rank = -1;
    c10d::OpType type = c10d::OpType::UNKNOWN;
    const char* title = nullptr;           // profiler title, e.g. "kolo:all_reduce"
    std::string what;                      // "allreduce (collective 17 of process group 0)"
    std::vector<at::Tensor> outputs;       // result(), and the future's value
    std::vector<at::Tensor> keep_alive;    // memory kolo reads or writes until completion
    std::function<Status()> finish;        // on success, before completion; may fail the op
    std::chrono::milliseconds timeout{0};  // of wait() without a timeout; 0: none
    // A point-to-point op ends by itself at `timeout` (kolo's deadline fails it, naming the
    // peer and the tag): wait() without a timeout allows it this much more before it gives up.
    std::chrono::milliseconds grace{0};
    uint64_t sequence = 0;
    std::shared_ptr<GroupHealth> health;  // null: the op does not affect the group's naming
    // A receive's sender (group rank, once complete): sourceRank(). Null for other ops.
    std::shared_ptr<const int> source;
  };
  explicit KoloWork(Spec spec);

  // After kolo took the op: its handle, and (barrier) the handles of the group's ops in flight
  // before it, which complete before this work counts as complete. Before the work is shared.
  void Track(Handle handle, std::vector<Handle> prior);
  // kolo's callback (the first call counts).
  void Complete(const Status& status);

  bool isCompleted() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return sequence_; }
  // A receive's sender (-1 until it completed); other ops: c10d's error, as gloo's.
  int sourceRank() const override;
  std::chrono::milliseconds getTimeout() const override { return timeout_; }

  const std::string& what() const { return what_; }

 private:
  // Waits for `handle` until `deadline`; throws the timeout error past it.
  void WaitFor(const Handle& handle, std::chrono::steady_clock::time_point deadline,
               std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10::ivalue::Future> MakeFuture() const;
  void CompleteFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future,
                      std::exception_ptr error);

  // Constant after Track().
  const std::string what_;
  const std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::function<Status()> finish_;  // run by Complete only
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds grace_;
  const uint64_t sequence_;
  const std::shared_ptr<GroupHealth> health_;
  const std::shared_ptr<const int> source_;
  Handle handle_;
  std::vector<Handle> prior_;
  std::atomic<bool> done_{false};  // Complete ran
  // Guarded by the base class's mutex_ (with completed_ and exception_).
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace kolo::torch_ext
