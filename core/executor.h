// Executor: runs the data-plane part of one decided Response (DESIGN.md §3). ops/ implements it
// (CPU ring collectives); the background loop calls it in response sequence order.
//
// Threading: background thread only. Execute blocks until the data movement has finished.
#pragma once

#include <vector>

#include "core/messages.h"
#include "core/tensor_entry.h"
#include "kolo/status.h"

namespace kolo {

class Executor {
 public:
  virtual ~Executor() = default;
  // Executes `response` (never an error response) over `entries`, this rank's entries for
  // response.names in the same order. On OK every entry's output holds its result. A failure
  // is job-fatal (the data plane is in an unknown state); its message names the op, the
  // tensors and the peer rank involved.
  virtual Status Execute(const Response& response, const std::vector<TensorEntry*>& entries) = 0;
};

}  // namespace kolo
