#include "ops/gpu/event_pool.h"

namespace kolo::gpu {

EventPool::~EventPool() {
  MutexLock lock(&mu_);
  for (EventHandle e : free_) device_->DestroyEvent(e).IgnoreError();
  for (EventHandle e : retired_events_) device_->DestroyEvent(e).IgnoreError();
  for (void* p : retired_buffers_) device_->Free(p).IgnoreError();
}

StatusOr<EventHandle> EventPool::Take() {
  {
    MutexLock lock(&mu_);
    if (!free_.empty()) {
      EventHandle e = free_.back();
      free_.pop_back();
      return e;
    }
  }
  return device_->CreateEvent(/*timing=*/true);
}

void EventPool::GiveBack(std::vector<EventHandle>* events) {
  MutexLock lock(&mu_);
  free_.insert(free_.end(), events->begin(), events->end());
  events->clear();
}

void EventPool::Retire(std::vector<EventHandle>* events, std::vector<void*>* buffers) {
  MutexLock lock(&mu_);
  retired_events_.insert(retired_events_.end(), events->begin(), events->end());
  retired_buffers_.insert(retired_buffers_.end(), buffers->begin(), buffers->end());
  events->clear();
  buffers->clear();
}

}  // namespace kolo::gpu
