// TensorQueue: where user threads hand ops to the background thread (DESIGN.md §1). It holds
// the table of in-flight entries by name, so that a second op with a name already in flight
// fails at enqueue.
//
// Threading: Enqueue, InFlight and Close may be called from any thread; TakeNew, Find, Remove
// and RemoveAll from the loop thread only (the background thread, or a caller driving the loop:
// BackgroundLoop::Drive), except that an executor's completion thread Removes the entries of an
// op launched asynchronously once it completed. Entries handed out by TakeNew stay owned by the
// table but are touched only by the loop thread until Remove returns them.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "core/tensor_entry.h"
#include "core/wakeup.h"
#include "kolo/status.h"

namespace kolo {

class TensorQueue {
 public:
  explicit TensorQueue(Wakeup* wakeup) : wakeup_(wakeup) {}

  // While one lives, Enqueue and EnqueueGroup from its thread do not wake the background
  // thread: a blocking call that will run its op itself (BackgroundLoop::Drive) saves the
  // wake-up, and must Notify the Wakeup itself if it does not. One thread at a time; not
  // nested.
  class QuietScope {
   public:
    QuietScope();
    ~QuietScope();
    QuietScope(const QuietScope&) = delete;
    QuietScope& operator=(const QuietScope&) = delete;
  };

  // A blank entry to fill and Enqueue: one a completed op gave back (Recycle) when there is
  // one, so that a repeated op allocates neither the entry nor its views' shapes (their
  // vectors keep their capacity). Its fields are as a new entry's, except that meta, input,
  // output and enqueued_at are whatever the caller must set anyway. Any thread.
  std::unique_ptr<TensorEntry> NewEntry();

  // Takes back a completed op's entry (its callback ran) for NewEntry; drops its callback and
  // allocator at once. Keeps up to a few; null is ignored. Any thread.
  void Recycle(std::unique_ptr<TensorEntry> entry);

  // Stores `entry` (taking it) and wakes the background thread. Fails, leaving `entry` with
  // the caller, if the queue is closed or an op with the same name is in flight.
  Status Enqueue(std::unique_ptr<TensorEntry>&& entry);

  // Stores all of `entries` or none (atomically: they reach the background thread, and so the
  // controller, in one batch). Fails, leaving `entries` with the caller, as Enqueue does, or if
  // two of them share a name.
  Status EnqueueGroup(std::vector<std::unique_ptr<TensorEntry>>& entries);

  // Entries enqueued since the last call, in enqueue order, into `*taken` (cleared first),
  // whose buffer the queue keeps for the next entries: a loop that passes the same vector
  // each time allocates nothing per op.
  void TakeNew(std::vector<TensorEntry*>* taken);

  // The in-flight entry `name`, still owned by the table; nullptr if there is none.
  TensorEntry* Find(const std::string& name);

  // Removes and returns the in-flight entry `name`; nullptr if there is none.
  std::unique_ptr<TensorEntry> Remove(const std::string& name);

  // How many ops are in flight on this rank (enqueued, not yet removed). Any thread.
  size_t InFlight();

  // From now on Enqueue fails with `why` (the first Close wins).
  void Close(const Status& why);

  // Removes every in-flight entry (for failing them all at shutdown or abort), except those
  // launched asynchronously (TensorEntry::in_flight), which their executor completes.
  std::vector<std::unique_ptr<TensorEntry>> RemoveAll();

 private:
  Wakeup* const wakeup_;

  Mutex mu_;
  using Table = std::unordered_map<std::string, std::unique_ptr<TensorEntry>>;
  Table table_ KOLO_GUARDED_BY(mu_);
  // The node of the last entry removed, its key's buffer kept: the next Enqueue inserts it
  // instead of allocating a node and a copy of the name.
  Table::node_type spare_node_ KOLO_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<TensorEntry>> spare_entries_ KOLO_GUARDED_BY(mu_);  // Recycle's
  std::vector<TensorEntry*> new_entries_ KOLO_GUARDED_BY(mu_);
  Status closed_ KOLO_GUARDED_BY(mu_);  // OK while open
  bool is_closed_ KOLO_GUARDED_BY(mu_) = false;
};

}  // namespace kolo
