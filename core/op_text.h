// How kolo names an op, a size and a list of ranks in messages, the same on every data plane
// (CPU, GPU): DescribeOp prefixes an executor's errors, FormatBytes prints sizes, RankList
// ranks. Pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/tensor_entry.h"

namespace kolo {

// "allreduce 'grad/w1'" for one tensor; "allreduce 'a', 'b' and 3 more (5 tensors, 12.0 MiB)"
// for several.
std::string DescribeOp(OpType op, const std::vector<TensorEntry*>& entries);
// The same into `*text` (replacing it): a caller that keeps the string allocates nothing per op.
void DescribeOp(OpType op, const std::vector<TensorEntry*>& entries, std::string* text);

// "512 B", "4.0 KiB", "12.0 MiB", "1.5 GiB".
std::string FormatBytes(size_t bytes);

// "1, 2, 5"; "" for none.
std::string RankList(const std::vector<int>& ranks);

}  // namespace kolo
