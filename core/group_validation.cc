#include "core/group_validation.h"

#include "core/op_validation.h"

namespace kolo {
namespace {

// The member counts of a group must agree and be at least one.
Status CheckCounts(const std::string& what, size_t names, size_t inputs, size_t outputs,
                   const char* outputs_word) {
  if (names == 0 || names != inputs || names != outputs) {
    return InvalidArgument(what + " needs as many names, inputs and " + outputs_word + " (got " +
                           std::to_string(names) + ", " + std::to_string(inputs) + ", " +
                           std::to_string(outputs) + "), at least one");
  }
  return Status::Ok();
}

// Validates every member with `one(i)`, checks they share a device (their dtypes may differ:
// one transfer per dtype), and tags them with the group.
template <typename ValidateOne>
StatusOr<std::vector<TensorMeta>> ValidateGroup(const std::string& what,
                                                const std::vector<std::string>& names,
                                                const std::vector<TensorView>& inputs,
                                                ValidateOne one) {
  const std::string key = GroupKey(names);
  std::vector<TensorMeta> metas;
  metas.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    StatusOr<TensorMeta> meta = one(i);
    if (!meta.ok()) return meta.status().WithContext(what);
    if (inputs[i].device != inputs[0].device) {
      return InvalidArgument(what + ": '" + names[i] + "' is on " + DeviceName(inputs[i].device) +
                             " but '" + names[0] + "' is on " + DeviceName(inputs[0].device) +
                             "; a group runs on one device");
    }
    meta->group = key;
    meta->group_size = static_cast<int>(names.size());
    metas.push_back(std::move(meta).value());
  }
  return metas;
}

}  // namespace

std::string GroupKey(const std::vector<std::string>& names) {
  std::string key;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) key += ',';
    for (char c : names[i]) {
      if (c == ',' || c == '\\') key += '\\';
      key += c;
    }
  }
  return key;
}

int GroupMemberIndex(const std::string& key, const std::string& name) {
  int index = 0;
  std::string member;
  for (size_t i = 0; i <= key.size(); ++i) {
    if (i == key.size() || key[i] == ',') {
      if (member == name) return index;
      member.clear();
      ++index;
    } else {
      if (key[i] == '\\' && i + 1 < key.size()) ++i;
      member += key[i];
    }
  }
  return -1;
}

StatusOr<std::vector<TensorMeta>> ValidateGroupedAllreduce(const std::vector<std::string>& names,
                                                           const std::vector<TensorView>& inputs,
                                                           const std::vector<TensorView>& outputs,
                                                           const AllreduceOptions& options) {
  const std::string what = "grouped allreduce";
  KOLO_RETURN_IF_ERROR(CheckCounts(what, names.size(), inputs.size(), outputs.size(), "outputs"));
  return ValidateGroup(what, names, inputs, [&](size_t i) {
    return ValidateAllreduce(names[i], inputs[i], outputs[i], options);
  });
}

StatusOr<std::vector<TensorMeta>> ValidateGroupedAllgather(
    const std::vector<std::string>& names, const std::vector<TensorView>& inputs,
    const std::vector<Allocator>& allocators) {
  const std::string what = "grouped allgather";
  KOLO_RETURN_IF_ERROR(
      CheckCounts(what, names.size(), inputs.size(), allocators.size(), "allocators"));
  return ValidateGroup(what, names, inputs, [&](size_t i) {
    return ValidateAllgather(names[i], inputs[i], allocators[i]);
  });
}

StatusOr<std::vector<TensorMeta>> ValidateGroupedReducescatter(
    const std::vector<std::string>& names, const std::vector<TensorView>& inputs,
    const std::vector<TensorView>& outputs, const AllreduceOptions& options, int rank, int size) {
  const std::string what = "grouped reducescatter";
  KOLO_RETURN_IF_ERROR(CheckCounts(what, names.size(), inputs.size(), outputs.size(), "outputs"));
  return ValidateGroup(what, names, inputs, [&](size_t i) {
    return ValidateReducescatter(names[i], inputs[i], outputs[i], options, rank, size);
  });
}

}  // namespace kolo
