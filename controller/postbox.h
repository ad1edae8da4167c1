// Postbox: the messages the Controller decided, on their way to its ControllerOutbox (the gRPC
// server), so that they leave in the order they were decided and are never sent under the
// controller's lock. Messages queued before Attach wait for it.
// Threading: Queue from any thread (the controller calls it under its own lock, in decision
// order); Flush and Attach from any thread, never under the controller's lock. Flushes are
// serialised, so a later Flush never overtakes an earlier one's messages.
#pragma once

#include <cstdint>
#include <vector>

#include "core/controller_link.h"
#include "core/messages.h"
#include "core/mutex.h"

namespace kolo::controller {

class Postbox {
 public:
  // `size`: the job's ranks, whom a message for every rank goes to.
  explicit Postbox(int size) : size_(size) {}

  // Sets where messages go and sends what was queued before. `outbox` must outlive this.
  void Attach(ControllerOutbox* outbox) KOLO_EXCLUDES(send_mu_, queue_mu_);
  // Queues `message` for `rank` (-1: every rank).
  void Queue(int rank, ControllerMessage message) KOLO_EXCLUDES(queue_mu_);
  // How many messages were ever queued: a caller that sees it grow knows it queued something.
  uint64_t queued_count() const KOLO_EXCLUDES(queue_mu_);
  // Sends what is queued, in order; nothing before Attach.
  void Flush() KOLO_EXCLUDES(send_mu_, queue_mu_);

 private:
  struct Outgoing {
    int rank = -1;  // -1: every rank
    ControllerMessage message;
  };
  const int size_;
  // Serialises Flush so that messages leave in decision order. Taken before queue_mu_.
  Mutex send_mu_;
  ControllerOutbox* outbox_ KOLO_GUARDED_BY(send_mu_) = nullptr;
  mutable Mutex queue_mu_ KOLO_ACQUIRED_AFTER(send_mu_);
  std::vector<Outgoing> queue_ KOLO_GUARDED_BY(queue_mu_);  // decided, not yet sent
  uint64_t queued_count_ KOLO_GUARDED_BY(queue_mu_) = 0;
};

}  // namespace kolo::controller
