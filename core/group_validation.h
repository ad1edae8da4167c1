// Local checks of the grouped ops (grouped allreduce, allgather and reducescatter), made before
// a group is queued: each member as its single op, then what the group adds. Pure functions;
// thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/messages.h"
#include "kolo/op_args.h"

namespace kolo {

// A group's key: its members' names in order, joined by commas, a comma or backslash within a
// name escaped by a backslash, so that different memberships never share a key.
std::string GroupKey(const std::vector<std::string>& names);

// The place of `name` among the members of group `key` (a GroupKey), or -1 if it is none.
int GroupMemberIndex(const std::string& key, const std::string& name);

// Checks a grouped allreduce: each tensor as an allreduce (dtypes may differ), one device for all,
// at least one member and as many names, inputs and outputs; returns their metadata, tagged with
// the group (its key names the members, so ranks that group differently disagree visibly).
StatusOr<std::vector<TensorMeta>> ValidateGroupedAllreduce(const std::vector<std::string>& names,
                                                           const std::vector<TensorView>& inputs,
                                                           const std::vector<TensorView>& outputs,
                                                           const AllreduceOptions& options);

// Checks a grouped allgather: each member as an allgather (with its own allocator), one device.
StatusOr<std::vector<TensorMeta>> ValidateGroupedAllgather(
    const std::vector<std::string>& names, const std::vector<TensorView>& inputs,
    const std::vector<Allocator>& allocators);

// Checks a grouped reducescatter of rank `rank` of `size`: each member as a reducescatter, one
// device.
StatusOr<std::vector<TensorMeta>> ValidateGroupedReducescatter(
    const std::vector<std::string>& names, const std::vector<TensorView>& inputs,
    const std::vector<TensorView>& outputs, const AllreduceOptions& options, int rank, int size);

}  // namespace kolo
