#include "transport/p2p/p2p_ring_setup.h"

#include <poll.h>

#include <cstring>
#include <string>

#include "transport/deadline.h"
#include "transport/p2p/p2p_frame.h"
#include "transport/socket_io.h"

namespace kolo::transport {
namespace {

constexpr uint64_t kMaxNameBytes = 255;

Status PeerError(int peer, const std::string& what) {
  return Unavailable("setting up the shared-memory rings with rank " + std::to_string(peer) + ": " +
                     what);
}

// Moves all `n` bytes (send or receive) on the non-blocking `fd` by `deadline`.
Status Exchange(int peer, int fd, bool send, uint8_t* data, size_t n, SteadyTime deadline) {
  size_t done = 0;
  while (done < n) {
    const IoResult io =
        send ? SendSome(fd, data + done, n - done) : RecvSome(fd, data + done, n - done);
    if (io.eof) return PeerError(peer, "its connection closed (the rank exited?)");
    if (io.error != 0)
      return PeerError(peer, std::string("its connection failed: ") + std::strerror(io.error));
    done += io.bytes;
    if (!io.would_block()) continue;
    const SteadyTime now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return PeerError(peer, "it did not answer in time (KOLO_START_TIMEOUT_SECONDS)");
    }
    pollfd p{fd, static_cast<short>(send ? POLLOUT : POLLIN), 0};
    ::poll(&p, 1, PollTimeoutMs(now, deadline));
  }
  return Status::Ok();
}

Status SendFrame(int peer, int fd, const P2pFrame& frame, const std::string& payload,
                 SteadyTime deadline) {
  P2pHeader header = EncodeP2pFrame(frame);
  KOLO_RETURN_IF_ERROR(Exchange(peer, fd, true, header.data(), header.size(), deadline));
  std::string bytes = payload;
  return Exchange(peer, fd, true, reinterpret_cast<uint8_t*>(bytes.data()), bytes.size(), deadline);
}

// Reads exactly one kRing frame and its payload (no read-ahead: what follows stays in the
// socket for the lane).
Status RecvFrame(int peer, int fd, P2pFrame* frame, std::string* payload, SteadyTime deadline) {
  P2pHeader header{};
  KOLO_RETURN_IF_ERROR(Exchange(peer, fd, false, header.data(), header.size(), deadline));
  if (!DecodeP2pFrame(header, frame) || frame->type != P2pFrameType::kRing ||
      frame->bytes > kMaxNameBytes) {
    return PeerError(peer, "it sent something else (a different kolo build?)");
  }
  payload->assign(frame->bytes, '\0');
  return Exchange(peer, fd, false, reinterpret_cast<uint8_t*>(payload->data()), payload->size(),
                  deadline);
}

// The segment, or null after warning that point-to-point with `peer` goes over its socket alone.
std::unique_ptr<ShmSegment> SegmentOrWarn(StatusOr<std::unique_ptr<ShmSegment>> segment, int peer,
                                          const Logger& logger) {
  if (segment.ok()) return std::move(*segment);
  logger->warn("point-to-point with rank {} goes over its socket alone: {}", peer,
               segment.status().ToString());
  return nullptr;
}

}  // namespace

StatusOr<std::vector<std::unique_ptr<P2pRing>>> ConnectP2pRings(
    int rank, const std::vector<bool>& same_host, bool enabled, const std::vector<int>& fds,
    double timeout_seconds, const Logger& logger) {
  const int size = static_cast<int>(fds.size());
  const SteadyTime deadline = AddSeconds(std::chrono::steady_clock::now(), timeout_seconds);
  auto pair = [&](int peer) { return peer != rank && fds[peer] >= 0 && same_host[peer]; };
  std::vector<std::unique_ptr<ShmSegment>> created(size);
  std::vector<std::unique_ptr<P2pRing>> rings(size);
  // 1. As the lower rank: create and offer. Nothing here waits for a peer.
  for (int peer = rank + 1; peer < size; ++peer) {
    if (!pair(peer)) continue;
    if (enabled) {
      created[peer] =
          SegmentOrWarn(ShmSegment::Create(FreshShmName(), P2pRing::kSegmentBytes), peer, logger);
    }
    const std::string name = created[peer] ? created[peer]->name() : "";
    P2pFrame offer;
    offer.type = P2pFrameType::kRing;
    offer.bytes = name.size();
    KOLO_RETURN_IF_ERROR(SendFrame(peer, fds[peer], offer, name, deadline));
  }
  // 2. As the higher rank: map what the lower ones offered and answer (they wait for nothing).
  for (int peer = 0; peer < rank; ++peer) {
    if (!pair(peer)) continue;
    P2pFrame offer;
    std::string name;
    KOLO_RETURN_IF_ERROR(RecvFrame(peer, fds[peer], &offer, &name, deadline));
    P2pFrame answer;
    answer.type = P2pFrameType::kRing;
    std::unique_ptr<ShmSegment> segment;
    if (enabled && !name.empty()) {
      segment = SegmentOrWarn(ShmSegment::Open(name, P2pRing::kSegmentBytes), peer, logger);
    }
    if (segment) {
      rings[peer] = std::make_unique<P2pRing>(std::move(segment), /*lower=*/false);
      answer.flags = kP2pRingMapped;
    }
    KOLO_RETURN_IF_ERROR(SendFrame(peer, fds[peer], answer, "", deadline));
  }
  // 3. As the lower rank: the answers.
  for (int peer = rank + 1; peer < size; ++peer) {
    if (!pair(peer)) continue;
    P2pFrame answer;
    std::string none;
    KOLO_RETURN_IF_ERROR(RecvFrame(peer, fds[peer], &answer, &none, deadline));
    if (!created[peer]) continue;
    created[peer]->Unlink();  // both have it mapped, or the peer never will
    if ((answer.flags & kP2pRingMapped) != 0) {
      rings[peer] = std::make_unique<P2pRing>(std::move(created[peer]), /*lower=*/true);
    }
  }
  return rings;
}

}  // namespace kolo::transport
