// TcpRoundLane: the fast path's RoundLane (core/round_lane.h) over the data mesh's round
// connections (TcpMesh::TakeRoundConnections), one authenticated TCP connection per peer.
//
// Wire format of one message, all integers big-endian:
//   magic "KLOR" (u32), round (u64), received_seq (u64), fusion_threshold (u64), flags (u32:
//   1 joined, 2 stopping), ready count (u32), diverted count (u32), then the ready ids and the
//   diverted ids (u32 each).
// Counts above kMaxRoundIds are refused as soon as the header is in, before any allocation.
//
// Threading: background thread only (see RoundLane).
#pragma once

#include <string>
#include <vector>

#include "core/logging.h"
#include "core/round_lane.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

constexpr uint32_t kRoundMagic = 0x4B4C4F52;  // "KLOR"
constexpr size_t kRoundHeaderBytes = 40;
// The most ids one list may carry: KOLO_CACHE_CAPACITY's upper bound.
constexpr uint32_t kMaxRoundIds = 1000000;

std::string EncodeRoundMessage(const RoundMessage& message);

// Splits a byte stream into messages. Feed it what arrived; take the complete messages.
class RoundStreamParser {
 public:
  // Appends `n` received bytes. Fails (and stays failed) on a wrong magic, unknown flags or
  // a count above kMaxRoundIds.
  Status Feed(const char* data, size_t n);
  // Moves every complete message into `out`.
  void Take(std::vector<RoundMessage>* out);

 private:
  Status ParseAvailable();

  std::string buffer_;  // bytes of the message being received
  std::vector<RoundMessage> complete_;
  Status failed_;
};

class TcpRoundLane final : public RoundLane {
 public:
  // `connections` by rank, invalid at `rank`'s own index (TcpMesh::TakeRoundConnections).
  TcpRoundLane(int rank, std::vector<UniqueFd> connections, Logger logger);

  Status SendToAll(const RoundMessage& message) override;
  Status Poll(std::vector<std::pair<int, RoundMessage>>* out, std::vector<int>* closed) override;
  std::vector<int> fds() const override { return open_fds_; }

 private:
  // Constant after construction.
  const int rank_;
  const std::vector<UniqueFd> connections_;
  const Logger logger_;

  // Sends what the peer's socket takes of out_[peer] now; a failure closes the peer.
  void Flush(size_t peer);
  void Close(size_t peer, const std::string& why);

  std::vector<RoundStreamParser> parsers_;  // by rank
  std::vector<std::string> out_;            // by rank: bytes not sent yet
  std::vector<bool> closed_;                // by rank: EOF or an error was seen
  std::vector<int> newly_closed_;           // not reported by Poll yet
  std::vector<int> open_fds_;               // the connections not closed yet
};

}  // namespace kolo::transport
