#include "transport/p2p/p2p_frame.h"

#include <cstring>

namespace kolo::transport {
namespace {

constexpr uint32_t kMagic = 0x4b503250;  // "KP2P"

template <typename T>
void Put(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof(T));
}

template <typename T>
T Get(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace

P2pHeader EncodeP2pFrame(const P2pFrame& frame) {
  P2pHeader out{};
  uint8_t* p = out.data();
  Put(p + 0, kMagic);
  Put(p + 4, static_cast<uint8_t>(frame.type));
  Put(p + 5, frame.dtype);
  Put(p + 6, frame.flags);
  Put(p + 8, frame.set);
  Put(p + 12, frame.pid);
  Put(p + 16, frame.seq);
  Put(p + 24, frame.tag);
  Put(p + 32, frame.bytes);
  Put(p + 40, frame.addr);
  return out;
}

bool DecodeP2pFrame(const P2pHeader& header, P2pFrame* frame) {
  const uint8_t* p = header.data();
  if (Get<uint32_t>(p) != kMagic) return false;
  const uint8_t type = Get<uint8_t>(p + 4);
  if (type < static_cast<uint8_t>(P2pFrameType::kOffer) ||
      type > static_cast<uint8_t>(P2pFrameType::kBell)) {
    return false;
  }
  frame->type = static_cast<P2pFrameType>(type);
  frame->dtype = Get<uint8_t>(p + 5);
  frame->flags = Get<uint16_t>(p + 6);
  frame->set = Get<int32_t>(p + 8);
  frame->pid = Get<int32_t>(p + 12);
  frame->seq = Get<uint64_t>(p + 16);
  frame->tag = Get<int64_t>(p + 24);
  frame->bytes = Get<uint64_t>(p + 32);
  frame->addr = Get<uint64_t>(p + 40);
  return true;
}

P2pFrameType P2pHeaderType(const P2pHeader& header) {
  return static_cast<P2pFrameType>(header[4]);
}

uint64_t P2pPayloadBytes(const P2pFrame& frame) {
  switch (frame.type) {
    case P2pFrameType::kOffer:
      return (frame.flags & kP2pInline) != 0 ? frame.bytes : 0;
    case P2pFrameType::kData:
    case P2pFrameType::kRefuse:
    case P2pFrameType::kCancel:
    case P2pFrameType::kRing:
      return frame.bytes;
    default:
      return 0;
  }
}

}  // namespace kolo::transport
