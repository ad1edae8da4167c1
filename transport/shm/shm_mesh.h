// ShmMesh: the SharedMemoryPlane (core/shared_memory_plane.h) of a job whose ranks all share
// one host. One POSIX shared-memory segment (transport/shm/shm_segment.h) holds a header, one
// word block per rank (its 64-bit arrival counter, what it published for the single-copy
// probe, its single-copy state), the fast path's round rings, a board per rank and
// kSlotSets x size staging slots. Rank 0 creates the segment under a fresh random name, sends
// the name to the others over the already connected TCP mesh, and unlinks it once every rank
// has mapped it. Then the ranks probe single copy (transport/shm/single_copy_probe.h) and agree.
//
// Single copy: ReadPeer and WritePeer go through process_vm_readv/writev
// (transport/peer_memory.h). So that no rank writes into the memory of a rank whose op
// failed and that has handed its buffers back to its caller, a rank that fails (a sync, a copy,
// an interrupt) marks itself left and waits until no peer is in the middle of a write into it
// (at most kWriterGraceMs); a writer announces each write, then checks that its target has not
// left, and does not write if it has (docs/DESIGN-NOTES.md, "Single copy").
//
// Sync: each rank's counter only grows (one step per Sync, the same sequence on every rank),
// so a value left from an earlier op never satisfies a later wait. A waiter polls keeping its
// core (with Config::spin, for Config::poll_budget of its time on the core, at most
// kBackgroundPoll on kolo's own thread: core/spin_wait.h) or yields a few
// times (without), then sleeps on a futex on its peer's counter (woken by the peer only when
// someone sleeps), re-checking its deadline and Interrupt every few milliseconds.
//
// Threading: Create, slot and Sync on the owner (background) thread; Interrupt from any thread.
// Destroy only when no Sync is running.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
  // Bytes of each rank's board: the addresses of some five thousand fused tensors.
  static constexpr size_t kBoardBytes = size_t{128} << 10;
  // How long a rank that failed waits for a peer's write into its memory to end: one write is
  // at most a piece of a few hundred KiB, a millisecond; the rest is for a loaded host.
  static constexpr int kWriterGraceMs = 250;

  // KOLO_SHM_SINGLE_COPY (kolo/options.h). kAuto takes it for every op in a job of two ranks
  // that each have a core (Config::spin), never for two ranks sharing one, and in jobs of more
  // ranks for ops of at most kAutoMaxBytesBeyondTwoRanks: there single copy was faster up to
  // 16 MiB and slower at 64 MiB (3, 4 and 8 ranks on two cores, docs/PERFORMANCE.md,
  // "Mid sizes against Open MPI"). kOn takes it for every op of any job. kOff does not even
  // probe.
  using SingleCopy = ShmSingleCopy;
  static constexpr size_t kAutoMaxBytesBeyondTwoRanks = size_t{16} << 20;

  struct Config {
    int rank = 0;
    int size = 1;
    size_t slot_bytes = kDefaultSlotBytes;  // rounded up to a multiple of 64
    // Every rank of the host has a core (TcpMesh::busy_poll(): the one place that rule is
    // decided): a waiter polls keeping its core for `poll_budget` (core/spin_wait.h) before it
    // sleeps. False: it yields a few times, then sleeps.
    bool spin = false;
    std::chrono::microseconds poll_budget{1000};  // KOLO_WAIT_SPIN_US
    // KOLO_TIMEOUT_SECONDS: the longest Sync waits for the last rank.
    double timeout_seconds = DefaultOptions().timeout_seconds;
    SingleCopy single_copy = SingleCopy::kAuto;  // the same on every rank
    Logger logger;                               // null: a "shm" logger at warning level
    // The job rank of each rank of the plane, for messages, when the plane spans some of the
    // job's ranks (one host's, in a multi-host job: bootstrap is then a SubsetDataPlane of
    // them, and rank and size count within it). Empty: the plane's ranks are the job's.
    std::vector<int> job_ranks;
  };

  // Collective: every rank of `bootstrap` (a connected mesh with no exchange in flight) calls
  // it with the same size, slot_bytes and single_copy. Blocks until every rank has mapped the
  // segment and the ranks agreed on single copy, or fails naming the rank that could not map
  // it (bootstrap errors, such as a lost peer, pass through), or, with SingleCopy::kOn, the
  // rank that cannot copy straight from or to a peer and why. On failure nothing is left in
  // /dev/shm.
  static StatusOr<std::unique_ptr<ShmMesh>> Create(const Config& config, DataPlane& bootstrap);
  ~ShmMesh() override;

  int rank() const override { return config_.rank; }
  int size() const override { return config_.size; }
  size_t slot_bytes() const override { return config_.slot_bytes; }
  uint8_t* slot(int set, int owner) override;
  int NextSlotSet() override { return static_cast<int>(chunks_++ % kSlotSets); }
  uint64_t chunks_taken() const override { return chunks_; }
  Status Sync(const std::string& what) override;
  void Interrupt(const Status& why) override;
  bool single_copy() const override { return agreed_.single_copy; }
  size_t single_copy_max_bytes() const override { return agreed_.max_bytes; }
  uint8_t* board(int owner) override;
  size_t board_bytes() const override { return kBoardBytes; }
  Status ReadPeer(int peer, const std::vector<PeerRange>& ranges, void* local,
                  const std::string& what) override;
  Status WritePeer(int peer, const void* local, const std::vector<PeerRange>& ranges,
                   const std::string& what) override;

  // The round rings of ShmRoundLane (transport/shm/shm_round_lane.h), valid while this lives.
  ShmRoundArea round_area() const;

  // The segment's name, already unlinked (for logs and tests).
  const std::string& segment_name() const { return segment_->name(); }

 private:
  ShmMesh(const Config& config, std::unique_ptr<ShmSegment> segment);
  // What the ranks agreed on single copy at creation (AgreeOnSingleCopy); constant after.
  struct SingleCopyAgreement {
    bool single_copy = false;
    size_t max_bytes = SIZE_MAX;  // the largest op that takes it
    std::vector<pid_t> pids;      // every rank's process id, with single copy
  };

  // The probe and the agreement (transport/shm/single_copy_probe.h), at creation.
  Status AgreeOnSingleCopy(const std::string& what);
  Status WaitFor(int peer, uint64_t step, const std::string& what);
  Status InterruptStatus() const;
  Status NotArrived(uint64_t step, const std::string& what) const;
  // Plane rank `r` as messages name it: its job rank (Config::job_ranks).
  int JobRank(int r) const;
  // Whether `peer` has left the plane after a failure of its own.
  bool HasLeft(int peer) const;
  // The status of a failed ReadPeer or WritePeer, or OK where the peer's own failure explains
  // it (it left: its memory may be gone; the op fails at the next sync with the cause).
  Status CopyFailed(int peer, int err, const char* verb, const std::string& what);
  // Records the first failure, leaves the plane and returns `status`.
  Status Fail(const Status& status);

  // Constant after construction.
  const Config config_;
  const std::unique_ptr<ShmSegment> segment_;
  // Owner thread only.
  uint64_t step_ = 0;           // sync points passed by this rank
  uint64_t chunks_ = 0;         // NextSlotSet calls
  SingleCopyAgreement agreed_;  // set once by Create
  Status failed_;               // the first failure; every later call returns it

  mutable Mutex mu_;
  Status interrupt_status_ KOLO_GUARDED_BY(mu_);  // set once by Interrupt
  std::atomic<bool> interrupted_{false};          // fast check; true once interrupt_status_ is set
};

// Bytes of the segment for `size` ranks and `slot_bytes` per slot.
size_t ShmMeshBytes(int size, size_t slot_bytes);

}  // namespace kolo::transport
