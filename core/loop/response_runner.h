// ResponseRunner: how a rank runs decided responses, the controller's and the fast path's
// rounds'. For the controller's it checks the sequence, skips the responses of process sets
// this rank is not in, finds this rank's entries by name and writes what the response teaches
// about cache ids into its OpCache (core/loop/op_cache.h: what the requests it announces carry,
// and what the fast path reads; this is its one writer). While this rank's join is in flight it
// stands in zero
// tensors for the allreduces it never submitted. It runs each response on the executor of its
// process set (Launch for asynchronous ones), applies process-set decisions to the registry,
// and completes the entries. Whatever must end the job comes back as a Fault for the loop.
//
// Threading: not thread-safe; the thread that does the loop's work (under
// BackgroundLoop::loop_mu_). Everything it is given must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/autotuner.h"
#include "core/clock.h"
#include "core/executor.h"
#include "core/loop/async_ops.h"
#include "core/loop/fault.h"
#include "core/loop/op_cache.h"
#include "core/loop/op_completer.h"
#include "core/loop/stand_ins.h"
#include "core/loop/work_order.h"
#include "core/messages.h"
#include "core/process_sets.h"
#include "core/tensor_queue.h"
#include "core/timeline/op_tracer.h"

namespace kolo {

class ResponseRunner {
 public:
  struct Config {
    // Process sets (core/process_sets.h): the registry the controller's add/remove decisions
    // apply to, and which responses run here (those of sets this rank is in). Null: a job
    // without sets (a set's response is a protocol error). `set_executor` gives the executor
    // of a set's responses (its members only); `set_removed` tells that a set is gone (its
    // executor may go). Both called on the loop's thread.
    ProcessSets* process_sets = nullptr;
    std::function<Executor*(int process_set)> set_executor;
    std::function<void(int process_set)> set_removed;
    // Rank 0 with KOLO_AUTOTUNE: told every allreduce this rank runs (core/autotuner.h).
    Autotuner* autotuner = nullptr;
  };

  // `executor` runs the global set's responses; `async` launches those it RunsAsync; `cache`
  // (this rank's OpCache, which it writes; `size` ranks) keeps what the fast path reads only
  // with `fast_path`. `tracer` may be null.
  ResponseRunner(Config config, TensorQueue* queue, Executor* executor,
                 const OpCompleter* completer, AsyncOps* async, OpTracer* tracer,
                 const Clock* clock, int size = 1, bool fast_path = false);

  // --- What this rank announces. ---
  // `join` (a join this rank submitted) is in flight: from now until its response, this rank
  // runs the allreduces of its set that it never submitted with zeros.
  void NoteJoin(const TensorEntry& join);
  // What the responses run so far taught about cache ids: the requests' ids (RequestFor) and
  // what the fast path reads.
  const OpCache& cache() const { return cache_; }

  // --- Running what was decided. ---
  // The controller's next response (in sequence: a gap is a protocol error).
  Fault RunControllerResponse(const Response& response);
  // A fused batch of cached ops a round decided (WorkOrder::Work); null entries (this rank
  // joined without the allreduce) get stand-ins.
  Fault RunRoundWork(WorkOrder::Work& work);

 private:
  // Executes `response` over `entries` (this rank's, or stand-ins) and completes them.
  Fault Execute(const Response& response, const std::vector<TensorEntry*>& entries);
  void ObserveAllreduce(const Response& response, const std::vector<TensorEntry*>& entries);
  // The executor of `process_set` (0: the job's), or null when that set has none.
  Executor* ExecutorFor(int process_set) const;
  bool HasJoined(int process_set) const;
  // A join decided: this rank's join (of the job or of a set) is over; its callers learn the
  // last rank to join, as a job rank.
  void FinishJoin(const Response& response, const std::vector<TensorEntry*>& entries);
  // add_process_set / remove_process_set decided: applies it to config_.process_sets.
  void ApplyProcessSetDecision(const Response& response, const std::vector<TensorEntry*>& entries);

  // Constant after construction.
  const Config config_;
  TensorQueue* const queue_;
  Executor* const executor_;
  const OpCompleter* const completer_;
  AsyncOps* const async_;
  OpTracer* const tracer_;
  const Clock* const clock_;

  uint64_t last_seq_ = 0;  // the last controller response run
  bool joined_ = false;    // this rank's join is in flight: it contributes zeros to allreduces
  std::vector<int> joined_sets_;  // likewise, of the process sets (other than 0) it joined
  StandIns stand_ins_;            // live while the response that needs them executes
  OpCache cache_;
};

}  // namespace kolo
