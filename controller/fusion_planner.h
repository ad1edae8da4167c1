// Fusion planning: turns the ordered list of ready tensors into Responses (DESIGN.md §2).
// Called by the Negotiator under the Controller's lock. Pure function; no threads.
//
// Rules: consecutive successful allreduces with the same dtype, device, reduce op, prescale and
// postscale join one response while the response's total bytes stay <= the threshold; a
// tensor bigger than the threshold alone goes alone. Other ops and error responses always
// stand alone. Order is kept: fusion never reorders tensors. Each response takes the next
// sequence number.
#pragma once

#include <cstdint>
#include <vector>

#include "controller/readiness_table.h"
#include "core/messages.h"

namespace kolo::controller {

// Bytes `meta` occupies in a fusion buffer.
int64_t TensorBytes(const TensorMeta& meta);

// Plans `ready` (in readiness order) into responses numbered *next_seq, *next_seq + 1, ...,
// and advances *next_seq past them. `fusion_threshold_bytes` >= 0; 0 disables fusion of
// non-empty tensors.
std::vector<Response> PlanResponses(const std::vector<ReadyTensor>& ready,
                                    int64_t fusion_threshold_bytes, uint64_t* next_seq);

}  // namespace kolo::controller
