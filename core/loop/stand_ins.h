// StandIns: zero tensors standing in for the allreduces a joined rank never submitted (join,
// README "Join"): the rank takes part in each with zeros. Live while the response that needs
// them executes (for an op launched asynchronously, until it completed).
//
// Threading: a value owned by one thread at a time (the loop's, then the op's completion).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/messages.h"
#include "core/tensor_entry.h"

namespace kolo {

class StandIns {
 public:
  // A zero tensor for name `index` of `response` (an allreduce), owned here.
  TensorEntry* Add(const Response& response, size_t index);
  // The names stood in for, in the order added (none: no allocation).
  std::vector<std::string> Names() const;
  void Clear() {
    entries_.clear();
    data_.clear();
  }

 private:
  std::vector<std::unique_ptr<TensorEntry>> entries_;
  std::vector<std::vector<uint8_t>> data_;
};

}  // namespace kolo
