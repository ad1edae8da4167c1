// Local checks an enqueue makes before an op is queued (DESIGN.md §1): everything that can be
// judged on one rank without the network. Pure functions; thread-safe.
#pragma once

#include <string>

#include "core/messages.h"
#include "kolo/kolo.h"

namespace kolo {

// Checks an allreduce's arguments and returns its metadata. Errors name the tensor and what
// is wrong with it.
StatusOr<TensorMeta> ValidateAllreduce(const std::string& name, const TensorView& input,
                                       const TensorView& output, const AllreduceOptions& options);

}  // namespace kolo
