#include "transport/grpc/response_names.h"

#include <algorithm>

namespace kolo::transport {

bool ResponseNames::CanGoById(const Response& response) const {
  if (response.is_error() || response.names.empty() ||
      response.cache_ids.size() != response.names.size() ||
      response.num_elements.size() != response.names.size()) {
    return false;
  }
  for (size_t i = 0; i < response.names.size(); ++i) {
    auto it = by_id_.find(response.cache_ids[i]);
    if (it == by_id_.end() || it->second.name != response.names[i] ||
        it->second.num_elements != response.num_elements[i]) {
      return false;
    }
  }
  return true;
}

void ResponseNames::Learn(const Response& response) {
  if (response.is_error()) return;
  const size_t n =
      std::min({response.names.size(), response.cache_ids.size(), response.num_elements.size()});
  for (size_t i = 0; i < n; ++i) {
    const uint32_t id = response.cache_ids[i];
    if (id == 0) continue;
    auto [it, fresh] = id_of_.try_emplace(response.names[i], id);
    if (!fresh && it->second != id) {
      by_id_.erase(it->second);  // retired: the name has a new id
      it->second = id;
    }
    by_id_[id] = Told{response.names[i], response.num_elements[i]};
  }
}

Status ResponseNames::Fill(Response* response) const {
  response->names.clear();
  response->num_elements.clear();
  response->names.reserve(response->cache_ids.size());
  response->num_elements.reserve(response->cache_ids.size());
  for (uint32_t id : response->cache_ids) {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) {
      return InvalidArgument("response " + std::to_string(response->seq) + " names cache id " +
                             std::to_string(id) + ", which no earlier response told");
    }
    response->names.push_back(it->second.name);
    response->num_elements.push_back(it->second.num_elements);
  }
  return Status::Ok();
}

void ResponseNames::Clear() {
  by_id_.clear();
  id_of_.clear();
}

}  // namespace kolo::transport
