// P2pLink: the lane's connection to one peer (p2p_lane.h): the socket and, with a same-host peer,
// the pair's shared-memory rings (p2p_ring.h); what waits to be written to each, and where the
// message being read from each goes. With rings every message but DATA goes by the ring, DATA
// and doorbells by the socket (docs/P2P.md, "What happens on the wire"). Writing is mechanical
// (whole chunks, in order, header and bytes in one system call where they fit); reading stops
// after each header and each payload so that the lane decides what the next bytes are for. Not
// thread-safe: the lane's lock guards it.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "transport/p2p/p2p_frame.h"
#include "transport/p2p/p2p_request.h"
#include "transport/p2p/p2p_ring.h"
#include "transport/socket_io.h"
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

// Where a link's bytes come from: its socket or its ring.
enum class P2pSource { kSocket = 0, kRing = 1 };

// Reads the socket's byte stream through a read-ahead buffer, so one system call takes in
// several small messages (a header, its bytes, the next header); a large read goes straight to
// its destination.
class P2pSocketReader {
 public:
  // Up to `want` bytes to `into` (null: dropped): the bytes read, 0 when the socket has nothing
  // more, or EOF / an errno (IoResult).
  IoResult Read(int fd, uint8_t* into, uint64_t want);
  // poll() said the socket is readable: Read may call recv() again.
  void Readable() { drained_ = false; }

 private:
  std::vector<uint8_t> ahead_;  // read ahead: [begin_, end_) not consumed yet
  size_t begin_ = 0;
  size_t end_ = 0;
  bool drained_ = false;  // the last recv() took all the socket had
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

  // The pair's rings (at lane start, before any message): from now on every message but DATA
  // goes by them.
  void AttachRing(std::unique_ptr<P2pRing> ring) { ring_ = std::move(ring); }
  P2pRing* ring() const { return ring_.get(); }

  // Queues a message for the ring (with one, all but DATA) or the socket.
  void Queue(P2pOutChunk chunk);
  // Queues a doorbell on the socket (the peer's reader may sleep, or its writer waits for room).
  void QueueBell();
  // Queues an answer to the peer's offer `seq` (ACK, PULL, REFUSE with its text) or this side's
  // CANCEL of its own offer `seq` (with the text and `code` of why, unless its timeout passed).
  void QueueAnswer(P2pFrameType type, uint64_t seq, const std::string& text = "", uint8_t code = 0);
  bool wants_write() const { return !out_.empty() || !ring_out_.empty(); }
  bool wants_socket_write() const { return !out_.empty(); }
  // Writes what the ring and the socket take. The sends whose DATA went out completely are
  // appended to `finished`. An error kills the link and is returned. `ask_for_room`: a full
  // ring's reader is to ring this side once it made room (else this side polls the ring).
  Status Flush(std::vector<std::shared_ptr<P2pRequest>>* finished, bool ask_for_room = true);
  // After reading the ring: rings the peer's writer if it waits for the room made.
  void AfterRingRead();
  // `owner`'s op ended before its bytes left: the chunks still pointing into its memory get a
  // copy of what they have not sent, and no longer complete it.
  void Detach(const P2pRequest* owner);

  // Reads from `Use`'s source into the current phase's destination until it is complete (true),
  // the source has nothing more (false), or an error or EOF (killed, error returned).
  StatusOr<bool> ReadPhase();
  // poll() said the socket is readable: ReadPhase may call recv() again.
  void Readable() { socket_reader_.Readable(); }
  // Which source ReadPhase, in() and NextMessage work on.
  void Use(P2pSource source) { active_ = static_cast<int>(source); }
  P2pInbound& in() { return in_[active_]; }
  P2pInbound& inbound(P2pSource source) { return in_[static_cast<int>(source)]; }
  // Back to reading a header.
  void NextMessage() { in_[active_] = P2pInbound(); }

  // Numbers of this side's offers, and the sends waiting on them (ACK, PULL or REFUSE).
  uint64_t NextSeq() { return ++last_seq_; }
  std::map<uint64_t, std::shared_ptr<P2pRequest>>& offered() { return offered_; }
  // Receives that sent PULL and wait for DATA, by the peer's offer number.
  std::map<uint64_t, std::shared_ptr<P2pRequest>>& pulling() { return pulling_; }
  // Whether the single copy from this peer's memory failed once (then it is not tried again).
  bool pull_refused = false;
  // Why the peer's lane stopped, as it said before closing (a CANCEL of offer 0): its end's
  // error names it.
  std::string peer_farewell;

 private:
  // Puts what the ring takes of ring_out_ in it, ringing the peer if its reader sleeps.
  void FlushRing(bool ask_for_room);

  const int peer_;
  UniqueFd fd_;
  Status dead_;
  std::deque<P2pOutChunk> out_;       // for the socket
  std::deque<P2pOutChunk> ring_out_;  // for the ring
  std::unique_ptr<P2pRing> ring_;
  P2pInbound in_[2];  // by P2pSource
  int active_ = 0;
  P2pSocketReader socket_reader_;
  uint64_t last_seq_ = 0;
  std::map<uint64_t, std::shared_ptr<P2pRequest>> offered_;
  std::map<uint64_t, std::shared_ptr<P2pRequest>> pulling_;
};

}  // namespace kolo::transport
