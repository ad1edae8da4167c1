// TensorEntry: one op a user enqueued, as the background thread holds it until its callback
// runs. Owned by the TensorQueue's table; the background thread alone touches an entry after
// it left the queue.
#pragma once

#include <chrono>
#include <string>

#include "core/messages.h"
#include "kolo/kolo.h"

namespace kolo {

struct TensorEntry {
  TensorMeta meta;  // name, op, dtype, shape, options as this rank submitted them
  TensorView input;
  TensorView output;
  Callback callback;
  std::chrono::steady_clock::time_point enqueued_at;
  bool traced = false;  // its op span was opened in the timeline (set before it is queued)
};

}  // namespace kolo
