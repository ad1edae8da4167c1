// kolo.tensorflow's reducing kernels: KoloAllreduce, KoloGroupedAllreduce, KoloReducescatter and
// KoloGroupedReducescatter (op_registrations.cc declares them). Each reads its input where
// TensorFlow keeps it (no copy) and writes an output TensorFlow allocated; an allreduce whose
// input buffer TensorFlow may reuse runs in place.
#include <string>
#include <vector>

#include "python/tensorflow/kolo_async_kernel.h"

namespace kolo::tf_ext {
namespace {

using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;

// The reduce op and scale factors every reducing op carries as attributes.
class ReducingKernel : public KoloAsyncKernel {
 public:
  explicit ReducingKernel(OpKernelConstruction* context) : KoloAsyncKernel(context) {
    int op = 0;
    float prescale = 1.0f;
    float postscale = 1.0f;
    OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &op));
    OP_REQUIRES_OK(context, context->GetAttr("prescale_factor", &prescale));
    OP_REQUIRES_OK(context, context->GetAttr("postscale_factor", &postscale));
    OP_REQUIRES_OK(context, ToReduceOp(op, &options_.op));
    options_.prescale = prescale;
    options_.postscale = postscale;
  }

 protected:
  AllreduceOptions options_;
};

class AllreduceKernel : public ReducingKernel {
 public:
  using ReducingKernel::ReducingKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const int count = num_inputs() - 1;  // the last input is the names
    std::vector<std::string> names;
    OP_REQUIRES_OK_ASYNC(context, TensorNames(context, count, count, &names), done);
    std::vector<TensorView> inputs(count);
    std::vector<TensorView> outputs(count);
    for (int i = 0; i < count; ++i) {
      const Tensor& input = context->input(i);
      Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(
          context, context->forward_input_or_allocate_output({i}, i, input.shape(), &output), done);
      OP_REQUIRES_OK_ASYNC(context, ToView(input, "allreduce '" + names[i] + "'", &inputs[i]),
                           done);
      OP_REQUIRES_OK_ASYNC(context, ToView(*output, "allreduce '" + names[i] + "'", &outputs[i]),
                           done);
    }
    const bool grouped = type_string() == "KoloGroupedAllreduce";
    Start(context, std::move(done), [&](Callback callback) {
      if (grouped) {
        return grouped_allreduce_async(names, inputs, outputs, options_, std::move(callback));
      }
      return allreduce_async(names[0], inputs[0], outputs[0], options_, std::move(callback));
    });
  }
};

class ReducescatterKernel : public ReducingKernel {
 public:
  using ReducingKernel::ReducingKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const int count = num_inputs() - 1;
    std::vector<std::string> names;
    OP_REQUIRES_OK_ASYNC(context, TensorNames(context, count, count, &names), done);
    // Parts follow the set's ranks; outside the set (rank -1) the enqueue fails, naming it.
    const int set_rank = std::max(process_set_rank(process_set_id()), 0);
    const int set_size = std::max(process_set_size(process_set_id()), 1);
    std::vector<TensorView> inputs(count);
    std::vector<TensorView> outputs(count);
    for (int i = 0; i < count; ++i) {
      const Tensor& input = context->input(i);
      const std::string what = "reducescatter '" + names[i] + "'";
      OP_REQUIRES_OK_ASYNC(context, ToView(input, what, &inputs[i]), done);
      tensorflow::TensorShape shape;  // a scalar stays one: kolo refuses it at enqueue
      if (input.dims() > 0) {
        OP_REQUIRES_OK_ASYNC(
            context, ToShape(ReducescatterShape(inputs[i].shape, set_rank, set_size), &shape),
            done);
      }
      Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(context, context->allocate_output(i, shape, &output), done);
      OP_REQUIRES_OK_ASYNC(context, ToView(*output, what, &outputs[i]), done);
    }
    const bool grouped = type_string() == "KoloGroupedReducescatter";
    Start(context, std::move(done), [&](Callback callback) {
      if (grouped) {
        return grouped_reducescatter_async(names, inputs, outputs, options_, std::move(callback));
      }
      return reducescatter_async(names[0], inputs[0], outputs[0], options_, std::move(callback));
    });
  }
};

REGISTER_KERNEL_BUILDER(Name("KoloAllreduce").Device(tensorflow::DEVICE_CPU), AllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedAllreduce").Device(tensorflow::DEVICE_CPU),
                        AllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("KoloReducescatter").Device(tensorflow::DEVICE_CPU),
                        ReducescatterKernel);
REGISTER_KERNEL_BUILDER(Name("KoloGroupedReducescatter").Device(tensorflow::DEVICE_CPU),
                        ReducescatterKernel);

}  // namespace
}  // namespace kolo::tf_ext
