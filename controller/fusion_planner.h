// Fusion planning: turns the ordered list of ready tensors into Responses (DESIGN.md §2), cut
// by the fusion rule the fast path shares (core/fusion/fusion_rule.h). Called by the Negotiator
// under the Controller's lock. Pure function; no threads.
//
// Rules: consecutive successful tensors of the same fusible op join one response while the
// response's bytes stay <= the threshold: allreduces and reducescatters with the same dtype,
// device, reduce op, prescale and postscale; allgathers with the same dtype and device (their
// bytes are the gathered output's). A tensor bigger than the threshold goes alone. A grouped
// allreduce, allgather or reducescatter is one response per dtype whatever its size. Broadcast,
// alltoall, barrier, join and error responses always stand alone. Order is kept: fusion never
// reorders tensors, except that a mixed-dtype group's members are sorted into one response per
// dtype. Each response takes the next sequence number. An allgather response's first_dims holds
// one row of `size` first dimensions per tensor, in the order of its names.
#pragma once

#include <cstdint>
#include <vector>

#include "controller/readiness_table.h"
#include "core/messages.h"

namespace kolo::controller {

// Plans `ready` (in readiness order) into responses numbered *next_seq, *next_seq + 1, ...,
// and advances *next_seq past them. `fusion_threshold_bytes` >= 0; 0 disables fusion of
// non-empty tensors.
std::vector<Response> PlanResponses(const std::vector<ReadyTensor>& ready,
                                    int64_t fusion_threshold_bytes, uint64_t* next_seq);

}  // namespace kolo::controller
