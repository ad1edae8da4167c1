// P2pLink: the lane's connection to one peer (p2p_lane.h): the socket, what waits to be written
// to it, and where the message being read goes. Writing is mechanical (whole chunks, in order,
// header and bytes in one system call where they fit); reading stops after each header and each
// payload so that the lane decides what the next bytes are for. Not thread-safe: the lane's lock
// guards it.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "transport/p2p/p2p_frame.h"
#include "transport/p2p/p2p_request.h"
#include "transport/unique_fd.h"

namespace kolo::transport {

// One message to write: a header and the bytes after it, from the caller's memory (`payload`)
// or owned (`owned`).
struct P2pOutChunk {
  P2pHeader header{};
  const uint8_t* payload = nullptr;
  uint64_t payload_bytes = 0;
  std::vector<uint8_t> owned;
  uint64_t sent = 0;  // of header + payload
  // Whose memory `payload` is; set for the send whose bytes these are (a DATA chunk completes it
  // once written).
  std::shared_ptr<P2pRequest> owner;
  bool completes_owner = false;
};

// Where the bytes being read go.
struct P2pInbound {
  enum class Phase { kHeader, kPayload };
  Phase phase = Phase::kHeader;
  P2pHeader header{};
  size_t header_got = 0;
  P2pFrame frame;
  // The payload's destination: a receive's tensor (`recv`), an offer's own buffer, REFUSE's
  // text, or nowhere (discarded).
  uint8_t* target = nullptr;
  uint64_t payload_got = 0;
  std::shared_ptr<P2pRequest> recv;
  std::vector<uint8_t> buffer;
  bool discard = false;
};

class P2pLink {
 public:
  P2pLink(int peer, UniqueFd fd) : peer_(peer), fd_(std::move(fd)) {}

  int peer() const { return peer_; }
  int fd() const { return fd_.get(); }
  bool alive() const { return dead_.ok(); }
  const Status& dead_why() const { return dead_; }
  // Marks it dead (the first reason counts) and shuts the socket down both ways; the fd stays
  // open until the lane goes, so no other thread's poll() sees a reused number.
  void Kill(const Status& why);

  void Queue(P2pOutChunk chunk) { out_.push_back(std::move(chunk)); }
  // Queues an answer to the peer's offer `seq` (ACK, PULL, REFUSE with its text) or this side's
  // CANCEL of its own offer `seq`.
  void QueueAnswer(P2pFrameType type, uint64_t seq, const std::string& text = "");
  bool wants_write() const { return !out_.empty(); }
  // Writes what the socket takes. The sends whose DATA went out completely are appended to
  // `finished`. An error kills the link and is returned.
  Status Flush(std::vector<std::shared_ptr<P2pRequest>>* finished);
  // `owner`'s op ended before its bytes left: the chunks still pointing into its memory get a
  // copy of what they have not sent, and no longer complete it.
  void Detach(const P2pRequest* owner);

  // Reads into the current phase's destination until it is complete (true), the socket has
  // nothing more (false), or an error or EOF (killed, error returned). Small messages come
  // through a read-ahead buffer, so one system call takes in several (a header, its bytes, the
  // next header); a large payload goes straight to its destination.
  StatusOr<bool> ReadPhase();
  // poll() said the socket is readable: ReadPhase may call recv() again.
  void Readable() { drained_ = false; }
  P2pInbound& in() { return in_; }
  // Back to reading a header.
  void NextMessage() { in_ = P2pInbound(); }

  // Numbers of this side's offers, and the sends waiting on them (ACK, PULL or REFUSE).
  uint64_t NextSeq() { return ++last_seq_; }
  std::map<uint64_t, std::shared_ptr<P2pRequest>>& offered() { return offered_; }
  // Receives that sent PULL and wait for DATA, by the peer's offer number.
  std::map<uint64_t, std::shared_ptr<P2pRequest>>& pulling() { return pulling_; }
  // Whether the single copy from this peer's memory failed once (then it is not tried again).
  bool pull_refused = false;

 private:
  const int peer_;
  UniqueFd fd_;
  Status dead_;
  std::deque<P2pOutChunk> out_;
  P2pInbound in_;
  std::vector<uint8_t> ahead_;  // read ahead: [ahead_begin_, ahead_end_) not consumed yet
  size_t ahead_begin_ = 0;
  size_t ahead_end_ = 0;
  bool drained_ = false;  // the last recv() took all the socket had
  uint64_t last_seq_ = 0;
  std::map<uint64_t, std::shared_ptr<P2pRequest>> offered_;
  std::map<uint64_t, std::shared_ptr<P2pRequest>> pulling_;
};

}  // namespace kolo::transport
