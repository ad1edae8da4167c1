// kolo.tensorflow's kernels without tensor data: KoloJoin and KoloBarrier (asynchronous, as the
// collectives), and the identity queries KoloSize, KoloLocalSize, KoloRank, KoloLocalRank and
// KoloProcessSetIncluded, which read kolo's default runtime when the graph runs (Horovod's
// size_op and friends), synchronously.
#include <memory>

#include "python/tensorflow/kolo_async_kernel.h"

namespace kolo::tf_ext {
namespace {

using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;

class JoinKernel : public KoloAsyncKernel {
 public:
  using KoloAsyncKernel::KoloAsyncKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(context, context->allocate_output(0, tensorflow::TensorShape({}), &output),
                         done);
    auto last_rank = std::make_shared<int>(-1);
    Finish finish = [output, last_rank]() {
      output->scalar<int32_t>()() = *last_rank;
      return absl::OkStatus();
    };
    Start(
        context, std::move(done),
        [&](Callback callback) { return join_async(last_rank.get(), std::move(callback)); },
        std::move(finish));
  }
};

class BarrierKernel : public KoloAsyncKernel {
 public:
  using KoloAsyncKernel::KoloAsyncKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    Start(context, std::move(done),
          [](Callback callback) { return barrier_async(std::move(callback)); });
  }
};

// A scalar int32 from kolo's default runtime, read when the op runs.
template <int (*Query)()>
class IdentityKernel : public tensorflow::OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* context) override {
    const int value = Query();
    OP_REQUIRES(context, value >= 0,
                absl::FailedPreconditionError(
                    "kolo has not been initialized; use kolo.tensorflow.init()."));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
    output->scalar<int32_t>()() = value;
  }
};

// Horovod's process_set_included_op: 1 for a member, 0 otherwise, -1 when kolo is not
// initialized, -2 for an unknown set (Horovod's HOROVOD_PROCESS_SET_ERROR_* values).
class ProcessSetIncludedKernel : public tensorflow::OpKernel {
 public:
  explicit ProcessSetIncludedKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_id_));
  }

  void Compute(OpKernelContext* context) override {
    int value = -1;
    if (is_initialized()) {
      value = process_set_size(process_set_id_) < 0 ? -2 : (process_set_rank(process_set_id_) >= 0);
    }
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
    output->scalar<int32_t>()() = value;
  }

 private:
  int process_set_id_ = 0;
};

// Horovod's size_op(process_set_id): the set's size.
class SizeKernel : public tensorflow::OpKernel {
 public:
  explicit SizeKernel(OpKernelConstruction* context) : OpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_id_));
  }

  void Compute(OpKernelContext* context) override {
    OP_REQUIRES(context, is_initialized(),
                absl::FailedPreconditionError(
                    "kolo has not been initialized; use kolo.tensorflow.init()."));
    const int value = process_set_size(process_set_id_);
    OP_REQUIRES(context, value >= 0,
                absl::InvalidArgumentError("process set " + std::to_string(process_set_id_) +
                                           " is unknown (never added, or removed)"));
    Tensor* output = nullptr;
    OP_REQUIRES_OK(context, context->allocate_output(0, tensorflow::TensorShape({}), &output));
    output->scalar<int32_t>()() = value;
  }

 private:
  int process_set_id_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("KoloJoin").Device(tensorflow::DEVICE_CPU), JoinKernel);
REGISTER_KERNEL_BUILDER(Name("KoloBarrier").Device(tensorflow::DEVICE_CPU), BarrierKernel);
REGISTER_KERNEL_BUILDER(Name("KoloSize").Device(tensorflow::DEVICE_CPU), SizeKernel);
REGISTER_KERNEL_BUILDER(Name("KoloLocalSize").Device(tensorflow::DEVICE_CPU),
                        IdentityKernel<&local_size>);
REGISTER_KERNEL_BUILDER(Name("KoloRank").Device(tensorflow::DEVICE_CPU), IdentityKernel<&rank>);
REGISTER_KERNEL_BUILDER(Name("KoloLocalRank").Device(tensorflow::DEVICE_CPU),
                        IdentityKernel<&local_rank>);
REGISTER_KERNEL_BUILDER(Name("KoloProcessSetIncluded").Device(tensorflow::DEVICE_CPU),
                        ProcessSetIncludedKernel);

}  // namespace
}  // namespace kolo::tf_ext
