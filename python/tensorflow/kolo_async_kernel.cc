#include "python/tensorflow/kolo_async_kernel.h"

#include "absl/strings/cord.h"

namespace kolo::tf_ext {

KoloAsyncKernel::KoloAsyncKernel(tensorflow::OpKernelConstruction* context)
    : AsyncOpKernel(context) {
  OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_id_));
  OP_REQUIRES_OK(context, context->GetAttr("drive", &drive_));
}

absl::Status MarkSubmitted(absl::Status status) {
  status.SetPayload(kSubmittedPayload, absl::Cord("1"));
  return status;
}

Allocator OutputAllocator(tensorflow::OpKernelContext* context, int index) {
  return [context, index](const std::vector<int64_t>& dims) -> void* {
    tensorflow::TensorShape shape;
    tensorflow::Tensor* output = nullptr;
    if (!ToShape(dims, &shape).ok() || !context->allocate_output(index, shape, &output).ok()) {
      return nullptr;
    }
    return output->data();
  };
}

}  // namespace kolo::tf_ext
