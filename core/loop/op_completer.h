// OpCompleter: how an op ends on this rank. Takes its entry out of the tensor queue (only now,
// so that the name stays in flight until the result is in place), runs its callback (never
// under a kolo lock; an exception it throws is logged, not propagated) and records the end
// of its span on the timeline. Used by the background loop and by an executor's completion
// thread (AsyncOps).
//
// Threading: constant after construction; any thread. The queue, the tracer and the clock
// must outlive it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/logging.h"
#include "core/messages.h"
#include "core/tensor_entry.h"
#include "core/tensor_queue.h"
#include "core/timeline/op_tracer.h"

namespace kolo {

class OpCompleter {
 public:
  // `tracer` may be null (no timeline).
  OpCompleter(TensorQueue* queue, OpTracer* tracer, const Clock* clock, Logger logger)
      : queue_(queue), tracer_(tracer), clock_(clock), logger_(std::move(logger)) {}

  // Runs the callback of `entry` (nothing if null) with `status`; `response` is the decision
  // it completed with, if any (for the trace).
  void Complete(std::unique_ptr<TensorEntry> entry, const Status& status,
                const Response* response = nullptr) const;

  // Removes the entries of `response`'s names from the queue and completes them with
  // `status`, or with their own local error where they have one. `skip`: names this rank ran
  // with zeros (stand-ins, not its own): an entry of that name in the queue is the next op of
  // that name and stays there.
  void CompleteResponse(const Response& response, const Status& status,
                        const std::vector<std::string>& skip) const;

  // Fails every entry in the queue with `why`, except those launched asynchronously, which
  // their executor completes (TensorQueue::RemoveAll).
  void FailQueued(const Status& why) const;

 private:
  TensorQueue* const queue_;
  OpTracer* const tracer_;
  const Clock* const clock_;
  const Logger logger_;
};

}  // namespace kolo
