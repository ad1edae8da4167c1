// GradientSync: kolo's analogue of Horovod's DistributedOptimizer, over the public API only.
// The training loop registers its gradient buffers once, marks each Ready as the backward pass
// produces it (which starts that gradient's allreduce at once, overlapping the rest of the
// backward pass), then calls Synchronize before the optimizer step.
//
// Threading: one training thread calls every method; a GradientSync is not safe for concurrent
// use. The allreduce callbacks run on kolo's background thread and touch only completion state
// guarded by a mutex, never a caller's buffer.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kolo/kolo.h"

namespace kolo {

struct GradientSyncOptions {
  // kAverage or kSum; any other op fails Create. kAverage divides the allreduced sum by the
  // number of ranks; kSum does not divide.
  ReduceOp op = ReduceOp::kAverage;
  // k >= 1: gradients of k backward passes are summed locally, and only every k-th pass
  // communicates (the sum, divided as `op` and average_aggregated_gradients say).
  int backward_passes_per_step = 1;
  // Horovod's two conventions for the k accumulated passes:
  //  false (default): the passes are summed, as Horovod's torch DistributedOptimizer (and
  //    TensorFlow's by default) leave them; kAverage divides by the ranks only.
  //  true: Horovod TensorFlow's average_aggregated_gradients=True: the sum of the passes is
  //    also divided by k (with kAverage: by ranks x k in all; with kSum: by k). Needs
  //    floating-point gradients when k > 1.
  bool average_aggregated_gradients = false;
  // Float32 gradients travel as float16 (rounded to nearest even) and are widened again in
  // Synchronize; other dtypes travel unchanged.
  bool fp16_compression = false;
  // Prepended to each gradient's name to form its kolo op name ("grad/" + "w1").
  std::string name_prefix = "grad/";
  // Backstop for Synchronize and WaitReduced; kolo's own deadlines fail a stuck op first.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

class GradientSync {
 public:
  // Syncs over `runtime`, which must outlive this object. Fails with kInvalidArgument on a
  // bad option.
  static StatusOr<std::unique_ptr<GradientSync>> Create(Runtime& runtime,
                                                        const GradientSyncOptions& options = {});
  // Syncs over the default runtime (kolo::init()), through the free functions.
  static StatusOr<std::unique_ptr<GradientSync>> Create(const GradientSyncOptions& options = {});

  // Does not wait. Ops still in flight keep the kolo-owned buffers they use alive; a caller
  // buffer that is being reduced in place (backward_passes_per_step 1, no compression) must
  // outlive them: call Synchronize first, or shut the runtime down before freeing it.
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Registers the caller's gradient buffer `gradient` (host memory, owned by the caller, valid
  // for the lifetime of this object) under `name`. Any dtype but bool with kAverage; with
  // backward_passes_per_step > 1 and average_aggregated_gradients it must be floating-point.
  // Only between steps (before the first Ready of a step). Every rank registers the same
  // names, dtypes and shapes.
  Status Register(const std::string& name, const TensorView& gradient);

  // The backward pass has produced `name`'s gradient in its buffer. On the k-th pass of a step
  // (k = backward_passes_per_step) this starts the gradient's allreduce and returns without
  // waiting; from then until Synchronize returns, the caller must not write the buffer. On an
  // earlier pass the buffer is added into a kolo-owned accumulator and is free again on return.
  // Fails for an unknown name, a second Ready of the same name in one pass, or when the
  // allreduce cannot be enqueued (that error is also returned by Synchronize).
  Status Ready(const std::string& name);

  // Ends one backward pass. Returns false at once on the first k-1 passes of a step: the
  // caller's buffers are not touched and the optimizer must not step. On the k-th pass, blocks
  // until every allreduce of the step has completed (at most options.timeout), writes the
  // reduced gradients into the caller's buffers and returns true: take the optimizer step.
  // Fails, naming the gradients, if a registered gradient was not marked Ready on the k-th pass
  // or an allreduce failed; the step is then dropped (its accumulated gradients discarded) and
  // the next pass starts a new step. After kDeadlineExceeded this object is unusable (every
  // later call returns that error): shut the runtime down.
  StatusOr<bool> Synchronize();

  // Whether `name`'s allreduce of the current step has completed (successfully or not).
  // False for an unknown name or one not yet started. Does not block.
  bool IsReduced(const std::string& name) const;
  // Blocks until `name`'s allreduce of the current step has completed, at most `timeout`
  // (then kDeadlineExceeded), and returns its status. kFailedPrecondition if it was not
  // started in this pass. The reduced value reaches the caller's buffer only in Synchronize.
  Status WaitReduced(const std::string& name, std::chrono::milliseconds timeout) const;

  // Backward passes already ended (Synchronize) in the current step: 0 .. k-1.
  int passes_in_step() const { return passes_in_step_; }

 private:
  struct Gradient;
  struct Completions;

  GradientSync(Runtime* runtime, const GradientSyncOptions& options);
  // Starts the allreduce of gradient `index`, whose wire buffer is ready.
  Status StartAllreduce(size_t index);
  // Copies (or widens) the reduced values of every gradient into the caller's buffers.
  void WriteBack();
  // Forgets the current step: accumulators, Ready marks and completions.
  void ResetStep();
  // "gradient 'w1'"
  std::string Describe(const Gradient& gradient) const;

  // Constant after construction. Null: the default runtime.
  Runtime* const runtime_;
  const GradientSyncOptions options_;

  // Training thread only.
  std::vector<std::unique_ptr<Gradient>> gradients_;
  std::unordered_map<std::string, size_t> index_;
  int passes_in_step_ = 0;
  Status broken_;  // a timed-out Synchronize: every later call fails with it

  // Shared with the allreduce callbacks, which may outlive this object.
  std::shared_ptr<Completions> completions_;
};

}  // namespace kolo
