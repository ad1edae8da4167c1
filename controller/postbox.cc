#include "controller/postbox.h"

#include <utility>

namespace kolo::controller {

void Postbox::Attach(ControllerOutbox* outbox) {
  {
    MutexLock send_lock(&send_mu_);
    outbox_ = outbox;
  }
  Flush();
}

void Postbox::Queue(int rank, ControllerMessage message) {
  MutexLock lock(&queue_mu_);
  queue_.push_back(Outgoing{rank, std::move(message)});
  ++queued_count_;
}

uint64_t Postbox::queued_count() const {
  MutexLock lock(&queue_mu_);
  return queued_count_;
}

void Postbox::Flush() {
  MutexLock send_lock(&send_mu_);
  if (outbox_ == nullptr) return;  // kept queued until Attach
  std::vector<Outgoing> batch;
  {
    MutexLock lock(&queue_mu_);
    batch.swap(queue_);
  }
  for (const Outgoing& out : batch) {
    if (out.rank >= 0) {
      outbox_->Send(out.rank, out.message);
    } else {
      outbox_->SendToAll(size_, out.message);
    }
  }
}

}  // namespace kolo::controller
