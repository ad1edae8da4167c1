// ResponseNames: which cache ids have been told by name (docs/PROTOCOL.md, "Cached ops by bit
// vector"). The controller's server keeps one for all worker streams and sends a response by
// its ids alone once every stream holds each id's name and element count from an earlier
// response; each worker's channel keeps its own, learnt from the same responses in the same
// order, and fills those back in. Ids are never reused (a name whose metadata changed gets a
// fresh id), so a told id means the same tensor until the name gets another; the book then
// forgets the old one and holds one entry per name. Not thread-safe: the server's lock guards
// its book, a channel's reader thread owns its.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/messages.h"
#include "kolo/status.h"

namespace kolo::transport {

class ResponseNames {
 public:
  // Whether `response` can go by id: a success naming at least one tensor, each with a cache
  // id that was told with the same name and element count.
  bool CanGoById(const Response& response) const;
  // Records the ids `response` (sent or received in full) tells, with their names and counts.
  void Learn(const Response& response);
  // Fills in the names and element counts of a response received by id; InvalidArgument
  // naming an id that was never told.
  Status Fill(Response* response) const;
  // Forgets everything (a stream joined that has not heard the earlier responses).
  void Clear();
  size_t size() const { return by_id_.size(); }

 private:
  struct Told {
    std::string name;
    int64_t num_elements = 0;
  };
  std::unordered_map<uint32_t, Told> by_id_;
  std::unordered_map<std::string, uint32_t> id_of_;  // each name's told id
};

}  // namespace kolo::transport
