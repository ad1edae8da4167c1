// The wire format of point-to-point (docs/P2P.md, "Protocol"): every message between a pair is
// a fixed 48-byte header, followed by the bytes its `bytes` field counts where its type carries
// any (an inline offer's tensor, DATA's tensor, REFUSE's text). Both ends of a connection are the
// same kolo build (the mesh's handshake binds the job), so fields travel in host byte order;
// the magic catches a stream that lost its framing. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kolo::transport {

enum class P2pFrameType : uint8_t {
  kOffer = 1,   // a send: its set, tag, dtype and size (and its bytes when kInline)
  kAck = 2,     // the receiver has the offer's bytes: the send is done
  kPull = 3,    // the receiver matched the offer: send DATA
  kData = 4,    // the offer's bytes, after a PULL
  kRefuse = 5,  // the receiver matched the offer and it disagrees: `bytes` of text follow
  // The sender gave up on its offer: its timeout passed, or (`bytes` of text follow, its status
  // code in `dtype`) its op failed otherwise, the job's abort say.
  kCancel = 6,
  // At lane start, between same-host peers (p2p_ring_setup.h): the lower rank's shared-memory
  // segment name (`bytes` of it follow; none: no rings), the higher rank's answer (flags
  // kP2pRingMapped: it mapped it).
  kRing = 7,
  kBell = 8,  // a doorbell: the sender wrote to the pair's ring (p2p_ring.h); no payload
};

enum P2pFrameFlags : uint16_t {
  kP2pInline = 1,      // an offer's bytes follow its header
  kP2pPullable = 2,    // an offer's bytes may be read from the sender's memory (pid, addr)
  kP2pRingMapped = 4,  // a kRing answer: the rings are in use
};

struct P2pFrame {
  P2pFrameType type = P2pFrameType::kOffer;
  uint8_t dtype = 0;
  uint16_t flags = 0;
  int32_t set = 0;
  int32_t pid = 0;
  uint64_t seq = 0;  // the sender's number of the offer, per connection and direction
  int64_t tag = 0;
  uint64_t bytes = 0;
  uint64_t addr = 0;
};

inline constexpr size_t kP2pHeaderBytes = 48;
using P2pHeader = std::array<uint8_t, kP2pHeaderBytes>;

P2pHeader EncodeP2pFrame(const P2pFrame& frame);
// False when the header is not one (wrong magic or type); the stream is then unusable.
bool DecodeP2pFrame(const P2pHeader& header, P2pFrame* frame);
// The type byte of an encoded header (no checks).
P2pFrameType P2pHeaderType(const P2pHeader& header);
// How many bytes follow the header on the wire.
uint64_t P2pPayloadBytes(const P2pFrame& frame);

}  // namespace kolo::transport
