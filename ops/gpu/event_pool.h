// EventPool: the GPU executor's device leftovers. Timing events are reused from op to op (taken
// at launch, given back once the op completed); the events and device memory of an op that
// failed, which the device may still use, are kept until the pool goes, after the executor
// destroyed its stream.
//
// Threading: any thread, under its own lock (the background thread takes events, the
// completion thread gives them back). The destructor runs once no one uses the pool.
#pragma once

#include <vector>

#include "core/mutex.h"
#include "ops/gpu/device_api.h"

namespace kolo::gpu {

class EventPool {
 public:
  // `device` must outlive the pool.
  explicit EventPool(DeviceApi* device) : device_(device) {}
  // Destroys every event and frees every retired buffer (errors ignored: a leak at worst).
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // A timing event: a free one, or a new one (CreateEvent's error when it fails).
  StatusOr<EventHandle> Take();
  // A completed op's events (emptied), for reuse.
  void GiveBack(std::vector<EventHandle>* events);
  // A failed op's events and buffers (emptied), kept until the pool goes.
  void Retire(std::vector<EventHandle>* events, std::vector<void*>* buffers);

 private:
  DeviceApi* const device_;
  Mutex mu_;
  std::vector<EventHandle> free_ KOLO_GUARDED_BY(mu_);
  std::vector<EventHandle> retired_events_ KOLO_GUARDED_BY(mu_);
  std::vector<void*> retired_buffers_ KOLO_GUARDED_BY(mu_);
};

}  // namespace kolo::gpu
