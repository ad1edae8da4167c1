#include "ops/eager_allreduce.h"

#include <cstring>

#include "ops/reduce_kernels.h"

namespace kolo::ops {

void ReduceEager(const void* const* inputs, int ranks, void* output, size_t count, DataType dtype,
                 ReduceOp op, const ReduceScaling& scaling, void* scratch) {
  auto* out = static_cast<uint8_t*>(output);
  if (scaling.prescale != 1.0) {
    ScaleCopy(out, inputs[0], count, dtype, scaling.prescale);
    for (int r = 1; r < ranks; ++r) {
      ScaleCopy(scratch, inputs[r], count, dtype, scaling.prescale);
      Reduce(out, scratch, count, dtype, op);
    }
  } else if (ranks == 1) {
    std::memcpy(out, inputs[0], count * DataTypeSize(dtype));
  } else {
    ReduceInto(out, inputs[0], inputs[1], count, dtype, op);
    for (int r = 2; r < ranks; ++r) Reduce(out, inputs[r], count, dtype, op);
  }
  ScaleResult(out, count, dtype, scaling);
}

}  // namespace kolo::ops
