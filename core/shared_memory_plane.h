// SharedMemoryPlane: the intra-host data plane that collective algorithms (ops/shm_*) run on
// when every rank of the job shares one host. transport/ implements it over one POSIX shared
// memory segment (transport/shm/shm_mesh.h). It offers staging slots that every rank can read and
// write, and a sync point: a rank publishes that it reached the next step and waits until every
// rank has. The algorithm decides who writes which bytes between two syncs.
//
// Threading: slot(), NextSlotSet() and Sync() are called by the background thread only, one at a
// time; Interrupt may be called from any thread and makes a running and every later Sync fail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/status.h"

namespace kolo {

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
  // Marks this rank's arrival at its next sync point and blocks until every rank has arrived
  // at the same one; writes made before the call are visible to every rank after it. Fails
  // (DeadlineExceeded, naming the ranks that did not arrive) when some rank has not arrived
  // within the configured timeout, or with the Interrupt status. After a failure the plane is
  // unusable. `what` ("allreduce 'grad/w1'") prefixes the error message.
  virtual Status Sync(const std::string& what) = 0;
  // Fails the running and all later Sync calls with `why`. The first call wins. Any thread.
  virtual void Interrupt(const Status& why) = 0;
};

}  // namespace kolo
