// The TensorFlow ops of kolo.tensorflow: their inputs, attributes and shape functions (kernels in
// *_kernels.cc; Python wrappers and gradients in python/kolo/tensorflow/mpi_ops.py). They follow
// Horovod's ops (HorovodAllreduce, ...) with two differences: the name kolo matches ranks by is
// a string input (`tensor_name(s)`), so that eager calls with new names reuse one cached kernel,
// and every dtype TensorFlow and kolo share is accepted. reduce_op holds Horovod's numbers.
// Collectives are stateless, as Horovod's, so that tf.function runs independent ones
// concurrently instead of in program order; join and barrier, which produce nothing to wait on,
// and the identity queries are stateful. `drive` (set by the Python wrappers when they run
// eagerly, where the calling thread waits for the op anyway) has that thread run the op itself,
// as kolo's blocking calls do, instead of handing it to kolo's background thread and being woken
// by the callback; inside a graph it stays false, so that an inter-op thread never waits and
// the ops of one step are fused.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace kolo::tf_ext {
namespace {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

#define KOLO_TF_TYPES \
  "{uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double, bool}"

// Each output i has input i's shape with an unknown first dimension (allgather, alltoall,
// reducescatter: the first dimension is known only when the op runs).
absl::Status FirstDimensionUnknown(InferenceContext* c, int count) {
  for (int i = 0; i < count; ++i) {
    ShapeHandle input;
    TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(i), 1, &input));
    ShapeHandle output;
    TF_RETURN_IF_ERROR(c->ReplaceDim(input, 0, c->UnknownDim(), &output));
    c->set_output(i, output);
  }
  return absl::OkStatus();
}

absl::Status SameShapes(InferenceContext* c, int count) {
  for (int i = 0; i < count; ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

absl::Status Scalar(InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("KoloAllreduce")
    .Attr("T: " KOLO_TF_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Input("tensor: T")
    .Input("tensor_name: string")
    .Output("output: T")
    .SetShapeFn([](InferenceContext* c) { return SameShapes(c, 1); });

REGISTER_OP("KoloGroupedAllreduce")
    .Attr("T: list(" KOLO_TF_TYPES ")")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Input("tensors: T")
    .Input("tensor_names: string")
    .Output("outputs: T")
    .SetShapeFn([](InferenceContext* c) { return SameShapes(c, c->num_outputs()); });

REGISTER_OP("KoloAllgather")
    .Attr("T: " KOLO_TF_TYPES)
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Input("tensor: T")
    .Input("tensor_name: string")
    .Output("output: T")
    .SetShapeFn([](InferenceContext* c) { return FirstDimensionUnknown(c, 1); });

REGISTER_OP("KoloGroupedAllgather")
    .Attr("T: list(" KOLO_TF_TYPES ")")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Input("tensors: T")
    .Input("tensor_names: string")
    .Output("outputs: T")
    .SetShapeFn([](InferenceContext* c) { return FirstDimensionUnknown(c, c->num_outputs()); });

REGISTER_OP("KoloBroadcast")
    .Attr("T: " KOLO_TF_TYPES)
    .Attr("root_rank: int")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Input("tensor: T")
    .Input("tensor_name: string")
    .Output("output: T")
    .SetShapeFn([](InferenceContext* c) { return SameShapes(c, 1); });

REGISTER_OP("KoloAlltoall")
    .Attr("T: " KOLO_TF_TYPES)
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Input("tensor: T")
    .Input("splits: int32")
    .Input("tensor_name: string")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(FirstDimensionUnknown(c, 1));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

REGISTER_OP("KoloReducescatter")
    .Attr("T: " KOLO_TF_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Input("tensor: T")
    .Input("tensor_name: string")
    .Output("output: T")
    .SetShapeFn([](InferenceContext* c) { return FirstDimensionUnknown(c, 1); });

REGISTER_OP("KoloGroupedReducescatter")
    .Attr("T: list(" KOLO_TF_TYPES ")")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Input("tensors: T")
    .Input("tensor_names: string")
    .Output("outputs: T")
    .SetShapeFn([](InferenceContext* c) { return FirstDimensionUnknown(c, c->num_outputs()); });

REGISTER_OP("KoloJoin")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .Output("last_rank: int32")
    .SetIsStateful()
    .SetShapeFn(Scalar);

REGISTER_OP("KoloBarrier")
    .Attr("process_set_id: int = 0")
    .Attr("drive: bool = false")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs);

REGISTER_OP("KoloSize")
    .Attr("process_set_id: int = 0")
    .Output("size: int32")
    .SetIsStateful()
    .SetShapeFn(Scalar);
REGISTER_OP("KoloLocalSize").Output("local_size: int32").SetIsStateful().SetShapeFn(Scalar);
REGISTER_OP("KoloRank").Output("rank: int32").SetIsStateful().SetShapeFn(Scalar);
REGISTER_OP("KoloLocalRank").Output("local_rank: int32").SetIsStateful().SetShapeFn(Scalar);
REGISTER_OP("KoloProcessSetIncluded")
    .Attr("process_set_id: int = 0")
    .Output("included: int32")
    .SetIsStateful()
    .SetShapeFn(Scalar);

}  // namespace kolo::tf_ext
