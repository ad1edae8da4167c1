#include "transport/round_codec.h"

#include <algorithm>
#include <cstring>

namespace kolo::transport {
namespace {

constexpr uint32_t kJoinedFlag = 1;
constexpr uint32_t kStoppingFlag = 2;
constexpr uint32_t kNoticeFlag = 4;
constexpr uint32_t kEagerFlag = 1u << 16;
constexpr uint32_t kStagedFlag = 1u << 17;
constexpr size_t kStagedBytes = 12;
constexpr size_t kEagerHeaderBytes = 8;
constexpr int kStepShift = 8;
constexpr uint32_t kStepMask = kMaxRoundStep << kStepShift;
constexpr uint32_t kKnownFlags =
    kJoinedFlag | kStoppingFlag | kNoticeFlag | kEagerFlag | kStagedFlag | kStepMask;

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
  EncodeRoundMessage(message, &out);
  return out;
}

void EncodeRoundMessage(const RoundMessage& message, std::string* out_string) {
  std::string& out = *out_string;
  const RoundEager& eager = message.eager;
  const bool has_eager = !eager.empty();
  size_t eager_bytes = 0;
  for (const RoundEager::Input& input : eager.inputs) eager_bytes += input.bytes;
  const bool has_staged = message.staged.has_value();
  out.reserve(out.size() + kRoundHeaderBytes +
              4 * (message.ready.size() + message.diverted.size()) +
              (has_staged ? kStagedBytes : 0) +
              (has_eager ? kEagerHeaderBytes + 8 * eager.inputs.size() + eager_bytes : 0));
  PutWord(&out, kRoundMagic);
  PutLong(&out, message.round);
  PutLong(&out, message.received_seq);
  PutLong(&out, message.fusion_threshold);
  PutLong(&out, message.hierarchy_min_bytes);
  PutWord(&out, (message.joined ? kJoinedFlag : 0) | (message.stopping ? kStoppingFlag : 0) |
                    (message.notice ? kNoticeFlag : 0) | (has_eager ? kEagerFlag : 0) |
                    (has_staged ? kStagedFlag : 0) |
                    (std::min(message.step, kMaxRoundStep) << kStepShift));
  PutWord(&out, static_cast<uint32_t>(message.ready.size()));
  PutWord(&out, static_cast<uint32_t>(message.diverted.size()));
  for (uint32_t id : message.ready) PutWord(&out, id);
  for (uint32_t id : message.diverted) PutWord(&out, id);
  if (has_staged) {
    PutWord(&out, message.staged.id);
    PutLong(&out, message.staged.exchange);
  }
  if (!has_eager) return;
  PutWord(&out, static_cast<uint32_t>(eager.inputs.size()));
  PutWord(&out, static_cast<uint32_t>(eager_bytes));
  for (const RoundEager::Input& input : eager.inputs) {
    PutWord(&out, input.id);
    PutWord(&out, input.bytes);
  }
  for (const RoundEager::Input& input : eager.inputs) {
    out.append(reinterpret_cast<const char*>(input.data), input.bytes);
  }
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
    if ((flags & ~kKnownFlags) != 0) {
      return Unavailable("round message with unknown flags " + std::to_string(flags));
    }
    if (ready > kMaxRoundIds || diverted > kMaxRoundIds) {
      return Unavailable("round message announces " + std::to_string(ready) + " + " +
                         std::to_string(diverted) + " cache ids, more than " +
                         std::to_string(kMaxRoundIds));
    }
    size_t total = kRoundHeaderBytes + 4 * (size_t{ready} + diverted);
    const size_t staged_at = total;
    if ((flags & kStagedFlag) != 0) total += kStagedBytes;
    uint32_t eager_count = 0;
    uint32_t eager_bytes = 0;
    const size_t eager_at = total;
    if ((flags & kEagerFlag) != 0) {
      if (buffer_.size() - at < total + kEagerHeaderBytes) break;
      eager_count = GetWord(p + total);
      eager_bytes = GetWord(p + total + 4);
      if (eager_count > kMaxRoundIds || eager_bytes > kMaxRoundEagerBytes) {
        return Unavailable("round message announces " + std::to_string(eager_count) +
                           " eager inputs of " + std::to_string(eager_bytes) +
                           " bytes, more than " + std::to_string(kMaxRoundEagerBytes));
      }
      total += kEagerHeaderBytes + 8 * size_t{eager_count} + eager_bytes;
    }
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
    if ((flags & kStagedFlag) != 0) KOLO_RETURN_IF_ERROR(ParseStaged(p + staged_at, &message));
    if ((flags & kEagerFlag) != 0) {
      KOLO_RETURN_IF_ERROR(
          ParseEager(p + eager_at + kEagerHeaderBytes, eager_count, eager_bytes, &message.eager));
    }
    complete_.push_back(std::move(message));
    at += total;
  }
  buffer_.erase(0, at);
  return Status::Ok();
}

Status RoundStreamParser::ParseStaged(const char* p, RoundMessage* out) {
  out->staged.id = GetWord(p);
  out->staged.exchange = GetLong(p + 4);
  if (out->staged.id == 0) return Unavailable("round message stages cache id 0");
  return Status::Ok();
}

Status RoundStreamParser::ParseEager(const char* p, uint32_t count, uint32_t bytes,
                                     RoundEager* out) {
  out->inputs.resize(count);
  uint64_t sum = 0;
  for (uint32_t i = 0; i < count; ++i) {
    RoundEager::Input& input = out->inputs[i];
    input.id = GetWord(p + 8 * size_t{i});
    input.bytes = GetWord(p + 8 * size_t{i} + 4);
    if (i > 0 && input.id <= out->inputs[i - 1].id) {
      return Unavailable("round message with eager cache ids out of order");
    }
    sum += input.bytes;
  }
  if (sum != bytes) {
    return Unavailable("round message's eager inputs add up to " + std::to_string(sum) +
                       " bytes, not the " + std::to_string(bytes) + " it announces");
  }
  // Each input at a multiple of 16 bytes of `owned` (malloc's alignment): the reduce kernels
  // read them as their dtype.
  auto padded = [](size_t n) { return (n + 15) / 16 * 16; };
  size_t room = 0;
  for (const RoundEager::Input& input : out->inputs) room += padded(input.bytes);
  out->owned.resize(room);
  const char* data = p + 8 * size_t{count};
  size_t offset = 0;
  for (RoundEager::Input& input : out->inputs) {
    std::memcpy(out->owned.data() + offset, data, input.bytes);
    input.data = out->owned.data() + offset;
    data += input.bytes;
    offset += padded(input.bytes);
  }
  return Status::Ok();
}

void RoundStreamParser::Take(std::vector<RoundMessage>* out) {
  for (RoundMessage& m : complete_) out->push_back(std::move(m));
  complete_.clear();
}

}  // namespace kolo::transport
