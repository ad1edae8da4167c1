// Validation of the metadata that ranks announce for one tensor: well-formedness of a single
// announcement, and agreement across ranks. Called by the ReadinessTable and the Negotiator.
// Pure functions over plain structs; safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "core/messages.h"
#include "core/wire_limits.h"
#include "kolo/status.h"

namespace kolo::controller {

// Checks one announcement from `rank` on its own: a non-empty name, op/dtype/reduce op inside
// their enums, no negative dimension, at most kMaxTensorBytes (core/wire_limits.h), a dimension 0
// for allgather, alltoall and reducescatter, no average or scale factor for a bool reduction, and
// alltoall splits that are non-negative and add up to dimension 0. A failure is a protocol error
// (the worker validates these locally), so the status names the rank and the tensor.
Status CheckWellFormed(int rank, const TensorMeta& meta);

// Compares what two ranks announced for the same name, field by field in this order: op,
// dtype, shape, device (CPU or GPU; not the GPU index), reduce op, root, prescale, postscale.
// Returns "" when they agree, else the error text for the first field that differs, e.g.
//   Mismatched allreduce shapes for 'grad/w1': rank 0 sent [2, 3], rank 3 sent [3, 2]
// The name of `a` is used in the text.
std::string DescribeMismatch(int rank_a, const TensorMeta& a, int rank_b, const TensorMeta& b);

// Shortest decimal text that reads back as `value` ("1", "0.5", "0.1").
std::string FormatScale(double value);

}  // namespace kolo::controller
