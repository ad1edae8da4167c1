// Element-wise kernels of the CPU collectives: reduce one buffer into another, scale while
// copying (prescale/postscale), and integer division for average. Called by the ring
// algorithms (ops/ring_allreduce.cc) and the CPU executor on the background thread. Pure
// functions over caller-owned memory; safe from any thread on disjoint buffers.
//
// Buffers hold `count` elements of `dtype`, aligned for that dtype. Unsupported combinations
// (a dtype or op outside its enum, a non-1 factor for bool, division of a floating or bool
// buffer) are programmer errors and abort: the runtime validates dtype, op and scale factors
// at enqueue.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kolo/types.h"

namespace kolo::ops {

// dst[i] = dst[i] (op) src[i] for i in [0, count). kAverage reduces as kSum (the division
// happens once, after the whole reduction). Integer sum and product wrap modulo 2^bits.
// float16/bfloat16 are computed in float and rounded back to nearest even. min/max propagate
// NaN from either side. bool: sum, average and max are logical or, min and product logical
// and; any non-zero byte counts as true and results are 0 or 1. `dst` and `src` must not
// overlap.
void Reduce(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op);

// dst[i] = src[i] (op) dst[i]: Reduce with the operands in the other order, for a result that
// must land on the second operand (where the order matters: min and max with NaN on both
// sides keep the second's). Same rules as Reduce.
void ReduceReversed(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op);

// dst[i] = a[i] (op) b[i]: Reduce with the first operand read from `a` instead of `dst`, which
// saves a copy where the result must land elsewhere. Same rules as Reduce; `dst` may not
// overlap `a` or `b`.
void ReduceInto(void* dst, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op);

// dst[i] = src[i] * factor. factor == 1.0 is a plain copy (nothing at all when dst == src), the
// only factor allowed for bool. Bit for bit what Horovod's ScaleBuffer gives (kolo.torch's
// results must equal horovod.torch's): floating types multiply in their own precision, the
// factor first rounded to it (float32 and float64: float(factor) * x in float, factor * x in
// double; float16/bfloat16: in float, rounded back to nearest even). Integer types multiply in
// double and truncate toward zero (7 * 0.5 == 3, -7 * 0.5 == -3); a product outside the type's
// range saturates to its minimum or maximum. dst == src is allowed (in place); otherwise the
// buffers must not overlap.
void ScaleCopy(void* dst, const void* src, size_t count, DataType dtype, double factor);

// buf[i] = buf[i] / divisor for the integer dtypes (uint8, int8, uint16, int16, int32, int64),
// truncating toward zero like C++ integer division (-7 / 2 == -3). Used for integer average,
// so the result is the mean rounded toward zero. Horovod computes buf[i] * (1.0 / divisor) in
// double instead: the same for every divisor up to 48 and |sum| < 2^22 (checked exhaustively),
// but not always beyond (49 ranks: 49 * (1.0 / 49) truncates to 0); kolo keeps the exact
// quotient (docs/TORCH.md). `divisor` must be > 0.
void DivideInPlace(void* buf, size_t count, DataType dtype, int64_t divisor);

// buf[i] = buf[i] * factor / divisor for the integer dtypes: the end of an integer average
// with a postscale. factor == 1.0 is DivideInPlace (exact in every integer type); otherwise
// Horovod's rule, bit for bit: buf[i] * (factor / divisor) in double, truncated toward zero
// and saturated like ScaleCopy (so 10 * 0.3 averaged over 3 ranks is 0, as in Horovod, whose
// 0.3 / 3 rounds below 0.1). `divisor` must be > 0.
void ScaleDivideInPlace(void* buf, size_t count, DataType dtype, double factor, int64_t divisor);

}  // namespace kolo::ops
