#include "core/loop/stand_ins.h"

namespace kolo {

TensorEntry* StandIns::Add(const Response& response, size_t index) {
  const int64_t count = index < response.num_elements.size() ? response.num_elements[index] : 0;
  data_.emplace_back(static_cast<size_t>(count) * DataTypeSize(response.dtype), 0);
  auto entry = std::make_unique<TensorEntry>();
  entry->meta.name = response.names[index];
  entry->meta.dtype = response.dtype;
  entry->meta.shape = {count};
  entry->input = {data_.back().data(), response.dtype, {count}, Device::Cpu()};
  entry->output = entry->input;
  entries_.push_back(std::move(entry));
  return entries_.back().get();
}

std::vector<std::string> StandIns::Names() const {
  std::vector<std::string> names;
  for (const auto& entry : entries_) names.push_back(entry->meta.name);
  return names;
}

}  // namespace kolo
