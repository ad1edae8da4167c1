// The fast path's round messages through shared memory (docs/FAST-PATH.md, "Wire"): the part
// of ShmMesh's segment that ShmRoundLane (transport/shm/shm_round_lane.h) uses. For every
// ordered pair of ranks (from, to) one single-producer single-consumer byte ring, and for every
// rank an inbox word, `armed`, that says whether its receiving thread may be asleep.
//
// Rings carry the same byte stream as the TCP round connections (RoundStreamParser parses it),
// so a message may be larger than a ring: what does not fit waits at the sender, which sets
// the ring's `sender_waits`; the receiver, after it has taken bytes out, clears it and rings
// the sender's doorbell (a byte on their round TCP connection).
//
// Ordering: the waker's store of its progress and the sleeper's store of its flag are each
// followed by a sequentially consistent load of the other's (Dekker): either the sleeper sees
// the data or the writer sees the flag and rings.
//
// Threading: each ring has one writer process/thread (its `from` rank's loop thread) and one
// reader (its `to` rank's loop thread); `armed` is stored by its rank and cleared by any.
// Values read from the segment are another process's writes: Read checks them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kolo/status.h"

namespace kolo::transport {

// Bytes of one ring: a round message with ~1000 ids fits in one go.
constexpr size_t kShmRoundRingBytes = 4096;

struct alignas(64) ShmRoundRing {
  alignas(64) uint64_t head;  // bytes taken out; written by the receiver only
  alignas(64) uint64_t tail;  // bytes put in; written by the sender only
  // 1: the sender has bytes that did not fit; the receiver rings it once it made room.
  uint32_t sender_waits;
  // Doorbell bytes `from` has written to `to` over their connection, for any reason: `to`
  // reads the connection only when this moved (or now and then, for its end).
  uint64_t bells;
  alignas(64) uint8_t data[kShmRoundRingBytes];
};

struct alignas(64) ShmRoundInbox {
  // 1: this rank's loop thread may sleep until its round connections are readable; a sender
  // that clears it (exchange) rings this rank's doorbell.
  uint32_t armed;
};

// A view of the round area inside a segment; the memory is owned by the segment.
class ShmRoundArea {
 public:
  ShmRoundArea() = default;
  ShmRoundArea(uint8_t* base, int size) : base_(base), size_(size) {}

  // Bytes of the area for `size` ranks (a multiple of 64).
  static size_t Bytes(int size);

  bool valid() const { return base_ != nullptr; }
  int size() const { return size_; }
  ShmRoundInbox* inbox(int rank) const;
  ShmRoundRing* ring(int from, int to) const;

 private:
  uint8_t* base_ = nullptr;
  int size_ = 0;
};

// Sender side: copies as much of [data, data + n) as the ring has room for and publishes it.
// Returns the bytes taken. `tail` is this sender's own count (the ring's tail is never read
// back from the segment). `seen_head`, where not null, is the sender's copy of the head as it
// last read it: the ring's head is read only when that leaves too little room for `n`.
size_t RingWrite(ShmRoundRing* ring, uint64_t* tail, const char* data, size_t n,
                 uint64_t* seen_head = nullptr);

// Receiver side: copies up to `capacity` published bytes to `out` and frees them. `head` is
// this receiver's own count. Fails if the ring's tail is not within one ring of `head` (the
// sender wrote something other than this protocol).
StatusOr<size_t> RingRead(ShmRoundRing* ring, uint64_t* head, char* out, size_t capacity);

// Whether the ring holds bytes past `head` (sequentially consistent: see Ordering above).
bool RingHasData(const ShmRoundRing* ring, uint64_t head);

}  // namespace kolo::transport
