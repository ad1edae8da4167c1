// kolo.tensorflow's moving kernels: KoloAllgather, KoloGroupedAllgather, KoloAlltoall and
// KoloBroadcast (op_registrations.cc declares them). Allgather and alltoall outputs are
// allocated by TensorFlow from kolo's allocator callback, once negotiation knows their shape;
// a broadcast whose input buffer TensorFlow may reuse runs in place.
#include <memory>
#include <string>
#include <vector>

#include "python/tensorflow/kolo_async_kernel.h"

namespace kolo::tf_ext {
namespace {

using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;

class AllgatherKernel : public KoloAsyncKernel {
 public:
  using KoloAsyncKernel::KoloAsyncKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const int count = num_inputs() - 1;
    std::vector<std::string> names;
    OP_REQUIRES_OK_ASYNC(context, TensorNames(context, count, count, &names), done);
    std::vector<TensorView> inputs(count);
    std::vector<Allocator> allocators;
    for (int i = 0; i < count; ++i) {
      // Horovod refuses a scalar with a precondition error; kolo would say invalid argument.
      OP_REQUIRES_ASYNC(context, context->input(i).dims() > 0,
                        absl::FailedPreconditionError(
                            "allgather '" + names[i] +
                            "': a scalar has no dimension 0 to concatenate; reshape it to [1]"),
                        done);
      OP_REQUIRES_OK_ASYNC(
          context, ToView(context->input(i), "allgather '" + names[i] + "'", &inputs[i]), done);
      allocators.push_back(OutputAllocator(context, i));
    }
    const bool grouped = type_string() == "KoloGroupedAllgather";
    Start(context, std::move(done), [&](Callback callback) {
      if (grouped) {
        return grouped_allgather_async(names, inputs, std::move(allocators), std::move(callback));
      }
      return allgather_async(names[0], inputs[0], std::move(allocators[0]), std::move(callback));
    });
  }
};

class AlltoallKernel : public KoloAsyncKernel {
 public:
  using KoloAsyncKernel::KoloAsyncKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::vector<std::string> names;
    OP_REQUIRES_OK_ASYNC(context, TensorNames(context, 2, 1, &names), done);
    TensorView input;
    OP_REQUIRES_OK_ASYNC(context, ToView(context->input(0), "alltoall '" + names[0] + "'", &input),
                         done);
    const Tensor& splits_tensor = context->input(1);
    OP_REQUIRES_ASYNC(context, splits_tensor.dims() <= 1,
                      absl::InvalidArgumentError("alltoall '" + names[0] +
                                                 "': splits must be a vector, got shape " +
                                                 splits_tensor.shape().DebugString()),
                      done);
    std::vector<int64_t> splits;
    const auto flat = splits_tensor.flat<int32_t>();
    for (int64_t i = 0; i < flat.size(); ++i) splits.push_back(flat(i));
    // Filled by kolo before the callback runs; read by `finish` on kolo's thread.
    auto received = std::make_shared<std::vector<int64_t>>();
    Finish finish = [context, received]() -> absl::Status {
      Tensor* output = nullptr;
      absl::Status status = context->allocate_output(
          1, tensorflow::TensorShape({static_cast<int64_t>(received->size())}), &output);
      if (!status.ok()) return status;
      auto out = output->vec<int32_t>();
      for (size_t i = 0; i < received->size(); ++i) out(i) = static_cast<int32_t>((*received)[i]);
      return absl::OkStatus();
    };
    Start(
        context, std::move(done),
        [&](Callback callback) {
          return alltoall_async(names[0], input, splits, OutputAllocator(context, 0),
                                received.get(), std::move(callback));
        },
        std::move(finish));
  }
};

class BroadcastKernel : public KoloAsyncKernel {
 public:
  explicit BroadcastKernel(OpKernelConstruction* context) : KoloAsyncKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_rank_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::vector<std::string> names;
    OP_REQUIRES_OK_ASYNC(context, TensorNames(context, 1, 1, &names), done);
    const Tensor& input = context->input(0);
    Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(
        context, context->forward_input_or_allocate_output({0}, 0, input.shape(), &output), done);
    TensorView in;
    TensorView out;
    const std::string what = "broadcast '" + names[0] + "'";
    OP_REQUIRES_OK_ASYNC(context, ToView(input, what, &in), done);
    OP_REQUIRES_OK_ASYNC(context, ToView(*output, what, &out), done);
    Start(context, std::move(done), [&](Callback callback) {
      return broadcast_async(names[0], in, out, root_rank_, std::move(callback));
    });
  }

 private:
  int root_rank_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("KoloAllgather").Device(tensorflow::DEVICE_CPU), AllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedAllgather").Device(tensorflow::DEVICE_CPU),
                        AllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("KoloAlltoall").Device(tensorflow::DEVICE_CPU), AlltoallKernel);
REGISTER_KERNEL_BUILDER(Name("KoloBroadcast").Device(tensorflow::DEVICE_CPU), BroadcastKernel);

}  // namespace
}  // namespace kolo::tf_ext
