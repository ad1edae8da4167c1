// P2pRing: the shared-memory rings of one same-host pair of point-to-point ranks (docs/P2P.md,
// "What happens on the wire"): one single-producer single-consumer byte ring per direction in a
// segment the lower rank creates at lane start (ConnectP2pRings, p2p_ring_setup.h). A ring
// carries the same byte stream as the pair's socket (p2p_frame.h: headers and their bytes), so a
// message may be larger than the ring: what does not fit waits at the writer.
//
// Two flags make the pair's socket a doorbell (a kBell frame) only where one is needed:
//   reader_sleeps: the reader's lane thread may sleep in poll() on the socket; the writer that
//                  publishes bytes and finds it set clears it and rings;
//   writer_waits:  the writer has bytes that did not fit; the reader that made room clears it
//                  and rings.
// Ordering: each side's store (its progress, its flag) is followed by a sequentially consistent
// load of the other's (Dekker): either the sleeper sees the bytes or the writer sees the flag.
//
// Threading: one lane on each side, under its lock (one writer and one reader per ring). Values
// read from the segment are another process's writes: Take checks them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kolo/status.h"
#include "transport/shm/shm_segment.h"

namespace kolo::transport {

// Bytes of one direction's ring: a message up to 32 KiB goes in one piece.
inline constexpr size_t kP2pRingBytes = 32 << 10;

struct alignas(64) P2pRingShared {
  alignas(64) uint64_t head;  // bytes taken out; the reader's
  alignas(64) uint64_t tail;  // bytes put in; the writer's
  alignas(64) uint32_t reader_sleeps;
  alignas(64) uint32_t writer_waits;
  alignas(64) uint8_t data[kP2pRingBytes];
};

class P2pRing {
 public:
  // Bytes of a pair's segment: the two rings.
  static constexpr size_t kSegmentBytes = 2 * sizeof(P2pRingShared);

  // `lower`: this side is the pair's lower rank (it writes the segment's first ring).
  P2pRing(std::unique_ptr<ShmSegment> segment, bool lower);

  // Writer. Copies as much of [data, data + n) as there is room for, unpublished; returns it.
  size_t Write(const uint8_t* data, size_t n);
  // Publishes what Write copied; true if the reader said it may sleep (then ring it: the flag
  // is cleared).
  bool Publish();
  // Nothing more fits: tells the reader to ring once it made room. True if room appeared
  // meanwhile (then the flag is withdrawn and the caller writes on).
  bool AskForRoom();

  // Reader. Whether published bytes wait (sequentially consistent, see Ordering).
  bool HasData() const;
  // Copies up to `n` published bytes to `out` (null: drops them) and frees them; fails if the
  // peer published more than a ring holds (it wrote something other than this protocol).
  StatusOr<size_t> Take(uint8_t* out, size_t n);
  // After Take freed room: true if the writer asked for it (ring it; the flag is cleared).
  bool WriterWaited();
  // This side's lane thread is about to sleep in poll() (true) or is awake (false).
  void SetSleeping(bool sleeping);

 private:
  std::unique_ptr<ShmSegment> segment_;
  P2pRingShared* const out_;  // this side writes
  P2pRingShared* const in_;   // this side reads
  uint64_t tail_ = 0;         // out_'s tail as this side wrote it (published or not)
  uint64_t head_ = 0;         // in_'s head
};

}  // namespace kolo::transport
