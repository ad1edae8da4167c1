// SharedMemoryPlane: the intra-host data plane that collective algorithms (ops/shm_*) run on
// when every rank of the job shares one host. transport/ implements it over one POSIX shared
// memory segment (transport/shm/shm_mesh.h). It offers staging slots that every rank can read and
// write, and a sync point: a rank publishes that it reached the next step and waits until every
// rank has. The algorithm decides who writes which bytes between two syncs. Where the host
// allows it (single_copy()), it also copies straight between this process's memory and a peer's
// (cross-memory attach), with a board per rank to publish the addresses on.
//
// Threading: everything but Interrupt is called by the background thread only, one call at a
// time; Interrupt may be called from any thread and makes a running and every later Sync,
// ReadPeer and WritePeer fail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// Bytes at `address` in some rank's address space.
struct PeerRange {
  uint64_t address = 0;
  size_t bytes = 0;
};

class SharedMemoryPlane {
 public:
  // Buffer sets. Every algorithm moves data in chunks, takes each chunk's set from
  // NextSlotSet(), writes a chunk's slots only before that chunk's first Sync and finishes
  // reading them before its next Sync (in this chunk or the next). Then a set is never
  // refilled while a rank still reads it, whatever mix of algorithms runs on the plane.
  static constexpr int kSlotSets = 2;

  virtual ~SharedMemoryPlane() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Bytes of one slot; a multiple of 64.
  virtual size_t slot_bytes() const = 0;
  // Slot `owner` of set `set` (0 <= set < kSlotSets): slot_bytes() bytes, 64-byte aligned,
  // mapped in every rank of the job. The plane puts no rule on who writes it.
  virtual uint8_t* slot(int set, int owner) = 0;
  // The set for the next chunk: 0, 1, 0, 1, ... across all algorithms (the same sequence on
  // every rank, since every rank runs the same chunks).
  virtual int NextSlotSet() = 0;
  // How many chunks NextSlotSet has handed out: the number of the next chunk, whose set is
  // chunks_taken() % kSlotSets. The same on every rank between the same two chunks.
  virtual uint64_t chunks_taken() const = 0;
  // Marks this rank's arrival at its next sync point and blocks until every rank has arrived
  // at the same one; writes made before the call are visible to every rank after it. Fails
  // (DeadlineExceeded, naming the ranks that did not arrive) when some rank has not arrived
  // within the configured timeout, or with the Interrupt status. After a failure the plane is
  // unusable. `what` ("allreduce 'grad/w1'") prefixes the error message.
  virtual Status Sync(const std::string& what) = 0;
  // Fails the running and all later Sync calls with `why`. The first call wins. Any thread.
  virtual void Interrupt(const Status& why) = 0;

  // Single copy. True when every rank found at the plane's creation that it may read and write
  // every peer's memory (process_vm_readv/writev) and the configuration allows it; the same on
  // every rank. Only then may ReadPeer and WritePeer be called.
  virtual bool single_copy() const = 0;
  // The most bytes an op may have to go single copy: SIZE_MAX, or less where the configuration
  // chose single copy for smaller ops only. The same on every rank.
  virtual size_t single_copy_max_bytes() const = 0;
  // Rank `owner`'s board: board_bytes() bytes (a multiple of 64, 64-byte aligned) in the
  // segment, for the addresses an algorithm publishes. The plane puts no rule on who writes it.
  virtual uint8_t* board(int owner) = 0;
  virtual size_t board_bytes() const = 0;
  // Copies `ranges` of rank `peer`'s memory (addresses in its process) into `local`, which holds
  // their total bytes. Blocks for the copy. Reads nothing, successfully, when the peer has
  // left the plane after a failure of its own (its next sync never comes, so the op fails
  // there with the cause). Fails (job-fatal; the plane is unusable afterwards) naming the peer
  // when its process is gone or the memory cannot be read, or with the Interrupt status.
  virtual Status ReadPeer(int peer, const std::vector<PeerRange>& ranges, void* local,
                          const std::string& what) = 0;
  // Copies `local` (the ranges' total bytes) into `ranges` of rank `peer`'s memory, with the
  // same rules. A rank that leaves the plane after a failure waits (briefly) until no peer is
  // writing into its memory, and no write starts afterwards: a failed op's buffers are the
  // caller's again when it returns.
  virtual Status WritePeer(int peer, const void* local, const std::vector<PeerRange>& ranges,
                           const std::string& what) = 0;
};

}  // namespace kolo
