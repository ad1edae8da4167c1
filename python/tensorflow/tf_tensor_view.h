// Conversions at the edge between TensorFlow and kolo's public API, for kolo.tensorflow's ops
// (python/tensorflow/*_kernels.cc): TensorFlow tensors as kolo TensorViews (no copy), kolo
// statuses as TensorFlow statuses, Horovod's reduce-op numbers as kolo's ReduceOp.
// Plain functions; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace kolo::tf_ext {

// A view of a CPU tensor's buffer (TensorFlow tensors are dense and row-major: never a copy).
// Fails with InvalidArgument for a dtype kolo has no counterpart of.
absl::Status ToView(const tensorflow::Tensor& tensor, const std::string& what, TensorView* view);

// The TensorFlow status for a failed kolo op, carrying kolo's message. Mismatches are
// FAILED_PRECONDITION, as Horovod reports them; the job-fatal codes keep their meaning (ABORTED,
// DEADLINE_EXCEEDED, UNAVAILABLE, INTERNAL; SHUTDOWN is ABORTED) so that kolo.tensorflow can
// raise HorovodInternalError for them.
absl::Status ToTfStatus(const Status& status);

// Horovod's reduce-op numbers (Average 0, Sum 1, Adasum 2, Min 3, Max 4, Product 5), which the
// ops keep in their reduce_op attribute, as kolo's ReduceOp. Adasum and unknown numbers fail.
absl::Status ToReduceOp(int horovod_op, ReduceOp* op);

// The op's name(s) from its string input `index`: a scalar (`count` 1) or a vector of `count`.
absl::Status TensorNames(tensorflow::OpKernelContext* context, int index, int count,
                         std::vector<std::string>* names);

// The shape as kolo's vector of dimensions, and back (for outputs kolo sizes).
std::vector<int64_t> Dims(const tensorflow::TensorShape& shape);
absl::Status ToShape(const std::vector<int64_t>& dims, tensorflow::TensorShape* shape);

}  // namespace kolo::tf_ext
