// The base of kolo.tensorflow's collective kernels: a TensorFlow AsyncOpKernel that enqueues its
// op into kolo and completes TensorFlow's `done` from kolo's completion callback, so that no
// TensorFlow thread waits for the network. ComputeAsync runs on a TensorFlow thread and returns
// once the op is queued; the completion runs on kolo's background thread (kolo/kolo.h's callback
// contract: exactly once, never under a kolo lock), where it may allocate outputs and sets the
// op's status before calling `done`. An op whose `drive` attribute is set (eagerly, where
// TensorFlow's calling thread waits for `done` anyway) is run by ComputeAsync's own thread while
// kolo's background thread is idle (kolo::enqueue_tracked), up to KOLO_WAIT_SPIN_US; then the
// completion, and `done`, usually run on that thread before ComputeAsync returns.
#pragma once

#include <functional>
#include <utility>

#include "kolo/kolo.h"
#include "python/tensorflow/tf_tensor_view.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace kolo::tf_ext {

// The payload type URL on the error of an op kolo had taken (its enqueue succeeded; it failed
// later, as on every rank that submitted it). Errors without it (a refused argument, a failed
// enqueue) tell kolo.tensorflow that the op never reached kolo, so that an unnamed op gives its
// number back (python/kolo/tensorflow/op_names.py reads it, as SUBMITTED_PAYLOAD).
inline constexpr char kSubmittedPayload[] = "kolo.submitted";

// `status` with the kSubmittedPayload mark.
absl::Status MarkSubmitted(absl::Status status);

class KoloAsyncKernel : public tensorflow::AsyncOpKernel {
 public:
  // Reads the process_set_id and drive attributes every collective kolo op has.
  explicit KoloAsyncKernel(tensorflow::OpKernelConstruction* context);

 protected:
  // What runs on kolo's thread once the op succeeded, before `done` (e.g. filling an output
  // only known then); its failure fails the op.
  using Finish = std::function<absl::Status()>;

  // Calls `enqueue(callback)` (a kolo *_async call returning kolo::Status) with this op's process
  // set as the thread's current one. A failed enqueue completes the op at once with kolo's
  // message; otherwise kolo's callback completes it (running `finish` first on success).
  template <typename Enqueue>
  void Start(tensorflow::OpKernelContext* context, DoneCallback done, const Enqueue& enqueue,
             Finish finish = nullptr) {
    Callback callback = [context, done, finish = std::move(finish)](const Status& status) {
      if (!status.ok()) {
        context->SetStatus(MarkSubmitted(ToTfStatus(status)));
      } else if (finish) {
        absl::Status finished = finish();
        if (!finished.ok()) context->SetStatus(MarkSubmitted(std::move(finished)));
      }
      done();
    };
    auto enqueue_in_set = [&](Callback on_done) {
      ProcessSetScope in_set(process_set_id_);
      return enqueue(std::move(on_done));
    };
    // Driven, the Handle is not needed (the callback completes the op, perhaps already has);
    // the set's scope covers the enqueue only, not the other ops the drive may run.
    const Status enqueued =
        drive_ ? enqueue_tracked(enqueue_in_set, std::move(callback), /*drive=*/true).status()
               : enqueue_in_set(std::move(callback));
    if (!enqueued.ok()) {  // kolo's contract: the callback will not run
      context->SetStatus(ToTfStatus(enqueued));
      done();
    }
  }

  int process_set_id() const { return process_set_id_; }

 private:
  int process_set_id_ = 0;
  bool drive_ = false;
};

// An allocator for output `index` of `context`, for ops whose output shape kolo learns in
// negotiation (allgather, alltoall). Runs on kolo's thread; nullptr (which fails the op) when
// TensorFlow cannot allocate.
Allocator OutputAllocator(tensorflow::OpKernelContext* context, int index);

}  // namespace kolo::tf_ext
