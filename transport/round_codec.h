// The fast path's round messages on the wire (docs/FAST-PATH.md), shared by the round lanes
// over TCP (transport/tcp/tcp_round_lane.h) and shared memory (transport/shm/shm_round_lane.h),
// which carry the same byte stream.
//
// Wire format of one message, all integers big-endian:
//   magic "KLOR" (u32), round (u64), received_seq (u64), fusion_threshold (u64),
//   hierarchy_min_bytes (u64), flags (u32:
//   1 joined, 2 stopping, 4 notice, bits 8-15 the dissemination step), ready count (u32), diverted
//   count (u32), then the ready ids and the diverted ids (u32 each); with flag 131072 (staged,
//   RoundMessage::staged) then the staged id (u32, not 0) and exchange (u64); with flag 65536
//   (eager, RoundMessage::eager) then the eager count (u32) and data bytes (u32), each eager id and
//   its size (u32 each), and the data.
// Counts above kMaxRoundIds are refused as soon as the header is in, before any allocation.
//
// Threading: EncodeRoundMessage is a pure function; a RoundStreamParser has one owner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/round_lane.h"
#include "kolo/status.h"

namespace kolo::transport {

constexpr uint32_t kRoundMagic = 0x4B4C4F52;  // "KLOR"
constexpr size_t kRoundHeaderBytes = 48;
// The most ids one list may carry: KOLO_CACHE_CAPACITY's upper bound.
constexpr uint32_t kMaxRoundIds = 1000000;
// The highest step the wire carries (a job of 2^255 ranks would need more).
constexpr uint32_t kMaxRoundStep = 255;
// The most eager bytes one message may carry (KOLO_EAGER_BYTES' upper bound is lower).
constexpr uint32_t kMaxRoundEagerBytes = 1u << 20;

std::string EncodeRoundMessage(const RoundMessage& message);
// The same, appended to `out` (whose capacity a sender reuses: a message with eager inputs is
// kilobytes, and a small op's round is on its critical path).
void EncodeRoundMessage(const RoundMessage& message, std::string* out);

// Splits a byte stream into messages. Feed it what arrived; take the complete messages.
class RoundStreamParser {
 public:
  // Appends `n` received bytes. Fails (and stays failed) on a wrong magic, unknown flags, a
  // count above kMaxRoundIds, eager data above kMaxRoundEagerBytes, eager ids out of order or
  // sizes that do not add up to the data.
  Status Feed(const char* data, size_t n);
  // Moves every complete message into `out`.
  void Take(std::vector<RoundMessage>* out);

 private:
  Status ParseAvailable();
  // The staged part at `p` into `out->staged`.
  static Status ParseStaged(const char* p, RoundMessage* out);
  // The eager part at `p` (its count and bytes read already) into `out`.
  static Status ParseEager(const char* p, uint32_t count, uint32_t bytes, RoundEager* out);

  std::string buffer_;  // bytes of the message being received
  std::vector<RoundMessage> complete_;
  Status failed_;
};

}  // namespace kolo::transport
