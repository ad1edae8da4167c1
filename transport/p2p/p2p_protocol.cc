// P2pLane's messages (p2p_lane.h): what a send offers, what a receive answers, and what each
// message that arrives does.
#include <unistd.h>

#include <cstring>

#include "transport/p2p/p2p_lane.h"
#include "transport/peer_memory.h"

namespace kolo::transport {
namespace {

bool Agrees(const P2pRequest& recv, const P2pFrame& offer) {
  return recv.bytes == offer.bytes && static_cast<uint8_t>(recv.dtype) == offer.dtype;
}

std::string Amount(uint64_t bytes, uint8_t dtype) {
  const auto type = static_cast<DataType>(dtype);
  const size_t size = DataTypeSize(type);
  return std::to_string(bytes) + " bytes (" + std::to_string(size == 0 ? 0 : bytes / size) + " x " +
         DataTypeName(type) + ")";
}

// The text both ends of a disagreeing pair fail with (the receiver writes it; REFUSE carries it).
std::string Disagreement(const P2pRequest& recv, int self, int sender, const P2pFrame& offer) {
  const int from = CallerRankOf(recv, sender);
  const int to = CallerRankOf(recv, self);
  std::string set = recv.set == 0 ? "" : " [process set " + std::to_string(recv.set) + "]";
  return "send from rank " + std::to_string(from) + " to rank " + std::to_string(to) + " (tag " +
         std::to_string(recv.tag) + ")" + set + " and its recv disagree: rank " +
         std::to_string(from) + " sends " + Amount(offer.bytes, offer.dtype) + ", rank " +
         std::to_string(to) + " receives " + Amount(recv.bytes, static_cast<uint8_t>(recv.dtype));
}

// The DATA message of `send`, whose offer `seq` the receiver pulled: completes it once written.
P2pOutChunk DataChunk(const std::shared_ptr<P2pRequest>& send, uint64_t seq) {
  P2pFrame data;
  data.type = P2pFrameType::kData;
  data.seq = seq;
  data.bytes = send->bytes;
  P2pOutChunk chunk;
  chunk.header = EncodeP2pFrame(data);
  chunk.payload = static_cast<const uint8_t*>(send->data);
  chunk.payload_bytes = send->bytes;
  chunk.owner = send;
  chunk.completes_owner = true;
  return chunk;
}

}  // namespace

void P2pLane::SendOfferLocked(const std::shared_ptr<P2pRequest>& send) {
  P2pLink& link = *links_[send->peer];
  send->seq = link.NextSeq();
  P2pFrame frame;
  frame.type = P2pFrameType::kOffer;
  frame.dtype = static_cast<uint8_t>(send->dtype);
  frame.set = send->set;
  frame.seq = send->seq;
  frame.tag = send->tag;
  frame.bytes = send->bytes;
  P2pOutChunk chunk;
  if (send->bytes <= config_.eager_bytes) {
    frame.flags = kP2pInline;
    chunk.payload = static_cast<const uint8_t*>(send->data);
    chunk.payload_bytes = send->bytes;
  } else if (config_.single_copy && config_.same_host[send->peer]) {
    frame.flags = kP2pPullable;
    frame.pid = static_cast<int32_t>(::getpid());
    frame.addr = reinterpret_cast<uint64_t>(send->data);
  }
  chunk.header = EncodeP2pFrame(frame);
  chunk.owner = send;
  link.offered()[send->seq] = send;
  link.Queue(std::move(chunk));
  FlushLocked(link);
}

void P2pLane::PostRecvLocked(const std::shared_ptr<P2pRequest>& recv) {
  std::optional<P2pOffer> offer = matcher_.TakeOfferFor(*recv);
  if (!offer) {
    matcher_.AddRecv(recv);
    return;
  }
  P2pLink& link = *links_[offer->peer];
  MatchLocked(recv, link, *offer);
  if (link.alive() && link.wants_write()) FlushLocked(link);
}

void P2pLane::MatchLocked(const std::shared_ptr<P2pRequest>& recv, P2pLink& link,
                          const P2pOffer& offer) {
  const P2pFrame& frame = offer.frame;
  recv->matched_peer = link.peer();
  recv->seq = frame.seq;
  recv->matched_at = std::chrono::steady_clock::now();
  if (recv->source != nullptr) *recv->source = CallerRankOf(*recv, link.peer());
  if (!Agrees(*recv, frame)) {
    const std::string text = Disagreement(*recv, config_.rank, link.peer(), frame);
    link.QueueAnswer(P2pFrameType::kRefuse, frame.seq, text);
    recv->state = P2pRequest::State::kReceiving;  // so that failing it does not CANCEL anything
    CompleteLocked(recv, Mismatch(text));
    return;
  }
  if ((frame.flags & kP2pInline) != 0) {
    if (frame.bytes > 0) std::memcpy(recv->data, offer.payload.data(), frame.bytes);
    link.QueueAnswer(P2pFrameType::kAck, frame.seq);
    CompleteLocked(recv, Status::Ok());
    return;
  }
  if ((frame.flags & kP2pPullable) != 0 && config_.single_copy && !link.pull_refused) {
    const int err =
        ReadProcessMemory(static_cast<pid_t>(frame.pid),
                          {{static_cast<uintptr_t>(frame.addr), frame.bytes}}, recv->data);
    if (err == 0) {
      link.QueueAnswer(P2pFrameType::kAck, frame.seq);
      CompleteLocked(recv, Status::Ok());
      return;
    }
    link.pull_refused = true;
    config_.logger->warn(
        "point-to-point from rank {}: reading its memory directly failed ({}); its larger "
        "tensors come over the connection from now on",
        link.peer(), ProcessMemoryErrorText(err));
  }
  recv->state = P2pRequest::State::kReceiving;
  recv->deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::duration<double>(recv->timeout_seconds));
  link.pulling()[frame.seq] = recv;
  link.QueueAnswer(P2pFrameType::kPull, frame.seq);
}

void P2pLane::ReadLocked(P2pLink& link, P2pSource source) {
  for (;;) {
    link.Use(source);
    StatusOr<bool> complete = link.ReadPhase();
    if (!complete.ok()) {
      // What the peer put in the ring before its end still counts (its last ACK, say).
      if (source == P2pSource::kSocket && link.ring() != nullptr) {
        ReadLocked(link, P2pSource::kRing);
      }
      PeerGoneLocked(link);
      return;
    }
    if (!*complete) {
      if (source == P2pSource::kRing) link.AfterRingRead();
      return;
    }
    if (link.in().phase == P2pInbound::Phase::kHeader) {
      if (!OnHeaderLocked(link)) return;
    } else {
      OnPayloadLocked(link);
      link.NextMessage();
    }
  }
}

bool P2pLane::OnHeaderLocked(P2pLink& link) {
  P2pInbound& in = link.in();
  if (!DecodeP2pFrame(in.header, &in.frame)) {
    link.Kill(Unavailable("rank " + std::to_string(link.peer()) +
                          " sent a malformed point-to-point message (a different kolo build?)"));
    PeerGoneLocked(link);
    return false;
  }
  in.phase = P2pInbound::Phase::kPayload;
  const P2pFrame& frame = in.frame;
  switch (frame.type) {
    case P2pFrameType::kOffer:
      OnOfferLocked(link);
      break;
    case P2pFrameType::kData: {
      auto it = link.pulling().find(frame.seq);
      if (it != link.pulling().end() && it->second->bytes == frame.bytes) {
        in.recv = it->second;
        in.target = static_cast<uint8_t*>(in.recv->data);
        link.pulling().erase(it);
      } else {
        in.discard = true;  // its receive ended meanwhile
      }
      break;
    }
    case P2pFrameType::kRefuse:
    case P2pFrameType::kCancel:
      in.buffer.resize(frame.bytes);
      in.target = in.buffer.data();
      break;
    case P2pFrameType::kRing:  // only at Start (p2p_ring_setup.h)
      in.discard = true;
      break;
    default:
      break;  // no payload: handled when it is "complete", at once
  }
  return true;
}

void P2pLane::OnOfferLocked(P2pLink& link) {
  P2pInbound& in = link.in();
  const P2pFrame& frame = in.frame;
  if ((frame.flags & kP2pInline) == 0) return;  // matched once "complete", below
  std::shared_ptr<P2pRequest> recv = matcher_.TakeRecvFor(link.peer(), frame.set, frame.tag);
  if (recv && Agrees(*recv, frame)) {  // straight into the receive's tensor
    recv->matched_peer = link.peer();
    recv->seq = frame.seq;
    recv->matched_at = std::chrono::steady_clock::now();
    recv->state = P2pRequest::State::kReceiving;
    in.recv = recv;
    in.target = static_cast<uint8_t*>(recv->data);
    return;
  }
  if (recv) {
    P2pOffer offer{link.peer(), frame, {}, 0};
    MatchLocked(recv, link, offer);  // refuses it
    in.discard = true;
    return;
  }
  in.buffer.resize(frame.bytes);
  in.target = in.buffer.data();
}

void P2pLane::OnPayloadLocked(P2pLink& link) {
  P2pInbound& in = link.in();
  const P2pFrame& frame = in.frame;
  switch (frame.type) {
    case P2pFrameType::kOffer: {
      if (in.discard) return;
      if (in.recv) {
        if (in.recv->source != nullptr) *in.recv->source = CallerRankOf(*in.recv, link.peer());
        link.QueueAnswer(P2pFrameType::kAck, frame.seq);
        CompleteLocked(in.recv, Status::Ok());
        return;
      }
      P2pOffer offer{link.peer(), frame, std::move(in.buffer), 0};
      std::shared_ptr<P2pRequest> recv = matcher_.TakeRecvFor(link.peer(), frame.set, frame.tag);
      if (recv) {
        MatchLocked(recv, link, offer);
      } else {
        matcher_.AddOffer(std::move(offer));
      }
      return;
    }
    case P2pFrameType::kAck:
    case P2pFrameType::kPull:
    case P2pFrameType::kRefuse: {
      auto it = link.offered().find(frame.seq);
      if (it == link.offered().end()) return;  // it timed out meanwhile
      std::shared_ptr<P2pRequest> send = it->second;
      link.offered().erase(it);
      send->matched_at = std::chrono::steady_clock::now();
      if (frame.type == P2pFrameType::kAck) {
        CompleteLocked(send, Status::Ok());
      } else if (frame.type == P2pFrameType::kRefuse) {
        CompleteLocked(send, Mismatch(std::string(in.buffer.begin(), in.buffer.end())));
      } else {
        send->state = P2pRequest::State::kPulled;
        link.Queue(DataChunk(send, frame.seq));
      }
      return;
    }
    case P2pFrameType::kData:
      if (in.recv && !in.discard) CompleteLocked(in.recv, Status::Ok());
      return;
    case P2pFrameType::kCancel:
      OnCancelLocked(link);
      return;
    case P2pFrameType::kRing:
    case P2pFrameType::kBell:  // woke this thread: the ring is read after the sockets
      return;
  }
}

// A CANCEL: of offer 0, the peer's lane stops (why, for the ops that then see it close);
// otherwise the peer's send ended before its bytes went (a timeout, or the reason it carries).
void P2pLane::OnCancelLocked(P2pLink& link) {
  P2pInbound& in = link.in();
  const P2pFrame& frame = in.frame;
  if (frame.seq == 0) {  // the peer's lane stops (offers count from 1)
    link.peer_farewell.assign(in.buffer.begin(), in.buffer.end());
    return;
  }
  if (matcher_.RemoveOffer(link.peer(), frame.seq)) return;
  auto it = link.pulling().find(frame.seq);
  if (it == link.pulling().end()) return;
  std::shared_ptr<P2pRequest> recv = it->second;
  link.pulling().erase(it);
  const std::string sender = "rank " + std::to_string(CallerRankOf(*recv, link.peer()));
  if (in.buffer.empty()) {
    CompleteLocked(recv, DeadlineExceeded(recv->what + ": " + sender +
                                          " gave up on its send (its timeout passed) before "
                                          "the data came"));
    return;
  }
  const bool known = frame.dtype > static_cast<uint8_t>(StatusCode::kOk) &&
                     frame.dtype <= static_cast<uint8_t>(StatusCode::kShutdown);
  CompleteLocked(recv, Status(known ? static_cast<StatusCode>(frame.dtype) : StatusCode::kAborted,
                              recv->what + ": " + sender + "'s send failed before the data came: " +
                                  std::string(in.buffer.begin(), in.buffer.end())));
}

void P2pLane::PeerGoneLocked(P2pLink& link) {
  const Status why = link.dead_why();
  std::vector<std::shared_ptr<P2pRequest>> orphans;
  for (const auto& request : pending_) {
    const int peer = request->is_send ? request->peer : request->matched_peer;
    if (peer == link.peer()) orphans.push_back(request);
  }
  std::vector<bool> alive(config_.size, false);
  for (const auto& other : links_) {
    if (other && other->alive()) alive[other->peer()] = true;
  }
  for (auto& recv : matcher_.PeerGone(link.peer(), alive)) orphans.push_back(std::move(recv));
  link.offered().clear();
  link.pulling().clear();
  for (P2pSource source : {P2pSource::kSocket, P2pSource::kRing}) {
    if (link.inbound(source).recv) link.inbound(source).discard = true;
  }
  for (const auto& request : orphans) FailLocked(request, why.WithContext(request->what));
}

}  // namespace kolo::transport
