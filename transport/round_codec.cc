#include "transport/round_codec.h"

#include <algorithm>

namespace kolo::transport {
namespace {

constexpr uint32_t kJoinedFlag = 1;
constexpr uint32_t kStoppingFlag = 2;
constexpr uint32_t kNoticeFlag = 4;
constexpr int kStepShift = 8;
constexpr uint32_t kStepMask = kMaxRoundStep << kStepShift;

void PutWord(std::string* out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(value >> shift));
}
void PutLong(std::string* out, uint64_t value) {
  PutWord(out, static_cast<uint32_t>(value >> 32));
  PutWord(out, static_cast<uint32_t>(value));
}
uint32_t GetWord(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}
uint64_t GetLong(const char* p) {
  return (uint64_t{GetWord(p)} << 32) | GetWord(p + 4);
}

}  // namespace

std::string EncodeRoundMessage(const RoundMessage& message) {
  std::string out;
  out.reserve(kRoundHeaderBytes + 4 * (message.ready.size() + message.diverted.size()));
  PutWord(&out, kRoundMagic);
  PutLong(&out, message.round);
  PutLong(&out, message.received_seq);
  PutLong(&out, message.fusion_threshold);
  PutLong(&out, message.hierarchy_min_bytes);
  PutWord(&out, (message.joined ? kJoinedFlag : 0) | (message.stopping ? kStoppingFlag : 0) |
                    (message.notice ? kNoticeFlag : 0) |
                    (std::min(message.step, kMaxRoundStep) << kStepShift));
  PutWord(&out, static_cast<uint32_t>(message.ready.size()));
  PutWord(&out, static_cast<uint32_t>(message.diverted.size()));
  for (uint32_t id : message.ready) PutWord(&out, id);
  for (uint32_t id : message.diverted) PutWord(&out, id);
  return out;
}

Status RoundStreamParser::Feed(const char* data, size_t n) {
  if (!failed_.ok()) return failed_;
  buffer_.append(data, n);
  failed_ = ParseAvailable();
  return failed_;
}

Status RoundStreamParser::ParseAvailable() {
  size_t at = 0;
  while (buffer_.size() - at >= kRoundHeaderBytes) {
    const char* p = buffer_.data() + at;
    if (GetWord(p) != kRoundMagic) return Unavailable("not a kolo round message (wrong magic)");
    const uint32_t flags = GetWord(p + 36);
    const uint32_t ready = GetWord(p + 40);
    const uint32_t diverted = GetWord(p + 44);
    if ((flags & ~(kJoinedFlag | kStoppingFlag | kNoticeFlag | kStepMask)) != 0) {
      return Unavailable("round message with unknown flags " + std::to_string(flags));
    }
    if (ready > kMaxRoundIds || diverted > kMaxRoundIds) {
      return Unavailable("round message announces " + std::to_string(ready) + " + " +
                         std::to_string(diverted) + " cache ids, more than " +
                         std::to_string(kMaxRoundIds));
    }
    const size_t total = kRoundHeaderBytes + 4 * (size_t{ready} + diverted);
    if (buffer_.size() - at < total) break;
    RoundMessage message;
    message.round = GetLong(p + 4);
    message.received_seq = GetLong(p + 12);
    message.fusion_threshold = GetLong(p + 20);
    message.hierarchy_min_bytes = GetLong(p + 28);
    message.joined = (flags & kJoinedFlag) != 0;
    message.stopping = (flags & kStoppingFlag) != 0;
    message.step = (flags & kStepMask) >> kStepShift;
    message.notice = (flags & kNoticeFlag) != 0;
    const char* ids = p + kRoundHeaderBytes;
    message.ready.reserve(ready);
    for (uint32_t i = 0; i < ready; ++i) message.ready.push_back(GetWord(ids + 4 * i));
    ids += 4 * size_t{ready};
    message.diverted.reserve(diverted);
    for (uint32_t i = 0; i < diverted; ++i) message.diverted.push_back(GetWord(ids + 4 * i));
    complete_.push_back(std::move(message));
    at += total;
  }
  buffer_.erase(0, at);
  return Status::Ok();
}

void RoundStreamParser::Take(std::vector<RoundMessage>* out) {
  for (RoundMessage& m : complete_) out->push_back(std::move(m));
  complete_.clear();
}

}  // namespace kolo::transport
