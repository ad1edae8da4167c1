// TensorEntry: one op a user enqueued, as the background thread holds it until its callback
// runs. Owned by the TensorQueue's table; the background thread alone touches an entry after
// it left the queue.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "core/messages.h"
#include "kolo/op_args.h"

namespace kolo {

// Entries are reused (TensorQueue::Recycle, NewEntry): a field added here must be reset there.
struct TensorEntry {
  TensorMeta meta;  // name, op, dtype, shape, options as this rank submitted them
  TensorView input;
  TensorView output;
  Callback callback;
  Allocator allocate;  // allgather, alltoall: provides `output` once its size is decided
  std::vector<int64_t>* received_splits = nullptr;  // alltoall: filled before the callback
  // Set before the callback: join's last rank to join, or add_process_set's new id.
  int* int_result = nullptr;
  // Set by the executor when the op failed on this rank only (the allocator returned no
  // memory) while the data plane went on: the entry completes with it, the job does not abort.
  Status local_error;
  // Set by the background thread when its response was launched asynchronously
  // (Executor::Launch): until the executor completes it, TensorQueue::RemoveAll leaves it and
  // the name stays in flight. Atomic: the executor's completion thread clears it while
  // RemoveAll may read it.
  std::atomic<bool> in_flight{false};
  std::chrono::steady_clock::time_point enqueued_at;
  // Timeline (core/timeline/op_tracer.h), set before the entry is queued: the hub generation its
  // span was opened under (0: not traced), and the track and slot it is drawn on.
  uint64_t trace_generation = 0;
  int trace_slot = 0;
  std::string trace_track;
};

}  // namespace kolo
