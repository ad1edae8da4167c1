// ShmMesh: the SharedMemoryPlane (core/shared_memory_plane.h) of a job whose ranks all share
// one host. One POSIX shared-memory segment (transport/shm/shm_segment.h) holds a header, one
// 64-bit arrival counter per rank and kSlotSets x size staging slots. Rank 0 creates the
// segment under a fresh random name, sends the name to the others over the already connected
// TCP mesh, and unlinks it once every rank has mapped it.
//
// Sync: each rank's counter only grows (one step per Sync, the same sequence on every rank),
// so a value left from an earlier op never satisfies a later wait. A waiter spins briefly
// (only with Config::spin), then yields, then sleeps on a futex on its peer's counter (woken by
// the peer only when someone sleeps), re-checking its deadline and Interrupt every few
// milliseconds.
//
// Threading: Create, slot and Sync on the owner (background) thread; Interrupt from any thread.
// Destroy only when no Sync is running.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/config/config_table.h"
#include "core/data_plane.h"
#include "core/logging.h"
#include "core/mutex.h"
#include "core/shared_memory_plane.h"
#include "transport/shm/shm_round_ring.h"
#include "transport/shm/shm_segment.h"

namespace kolo::transport {

class ShmMesh final : public SharedMemoryPlane {
 public:
  // Default bytes of one slot: big enough that a sync costs little next to the copies, small
  // enough that a step's slots stay in cache (docs/PERFORMANCE.md, shared-memory path).
  static constexpr size_t kDefaultSlotBytes = size_t{1} << 20;

  struct Config {
    int rank = 0;
    int size = 1;
    size_t slot_bytes = kDefaultSlotBytes;  // rounded up to a multiple of 64
    // Every rank of the host has a core (TcpMesh::busy_poll(): the one place that rule is
    // decided): a waiter spins briefly before it yields. False: it yields at once.
    bool spin = false;
    // KOLO_TIMEOUT_SECONDS: the longest Sync waits for the last rank.
    double timeout_seconds = DefaultOptions().timeout_seconds;
    Logger logger;  // null: a "shm" logger at warning level
  };

  // Collective: every rank of `bootstrap` (a connected mesh with no exchange in flight) calls
  // it with the same size and slot_bytes. Blocks until every rank has mapped the segment, or
  // fails naming the rank that could not (bootstrap errors, such as a lost peer, pass
  // through). On failure nothing is left in /dev/shm.
  static StatusOr<std::unique_ptr<ShmMesh>> Create(const Config& config, DataPlane& bootstrap);
  ~ShmMesh() override;

  int rank() const override { return config_.rank; }
  int size() const override { return config_.size; }
  size_t slot_bytes() const override { return config_.slot_bytes; }
  uint8_t* slot(int set, int owner) override;
  int NextSlotSet() override { return static_cast<int>(chunks_++ % kSlotSets); }
  Status Sync(const std::string& what) override;
  void Interrupt(const Status& why) override;

  // The round rings of ShmRoundLane (transport/shm/shm_round_lane.h), valid while this lives.
  ShmRoundArea round_area() const;

  // The segment's name, already unlinked (for logs and tests).
  const std::string& segment_name() const { return segment_->name(); }

 private:
  ShmMesh(const Config& config, std::unique_ptr<ShmSegment> segment);
  Status WaitFor(int peer, uint64_t step, const std::string& what);
  Status InterruptStatus() const;
  Status NotArrived(uint64_t step, const std::string& what) const;

  // Constant after construction.
  const Config config_;
  const std::unique_ptr<ShmSegment> segment_;
  const int spins_;  // pause instructions a waiter spins before yielding
  // Owner thread only.
  uint64_t step_ = 0;    // sync points passed by this rank
  uint64_t chunks_ = 0;  // NextSlotSet calls

  mutable Mutex mu_;
  Status interrupt_status_ KOLO_GUARDED_BY(mu_);  // set once by Interrupt
  std::atomic<bool> interrupted_{false};          // fast check; true once interrupt_status_ is set
};

// Bytes of the segment for `size` ranks and `slot_bytes` per slot.
size_t ShmMeshBytes(int size, size_t slot_bytes);

}  // namespace kolo::transport
