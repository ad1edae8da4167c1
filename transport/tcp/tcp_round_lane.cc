#include "transport/tcp/tcp_round_lane.h"

#include <algorithm>
#include <cerrno>

#include "core/errno_status.h"
#include "transport/tcp/tcp_socket.h"

namespace kolo::transport {
namespace {

constexpr uint32_t kJoinedFlag = 1;
constexpr uint32_t kStoppingFlag = 2;

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
  PutWord(&out, (message.joined ? kJoinedFlag : 0) | (message.stopping ? kStoppingFlag : 0));
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
    const uint32_t flags = GetWord(p + 28);
    const uint32_t ready = GetWord(p + 32);
    const uint32_t diverted = GetWord(p + 36);
    if ((flags & ~(kJoinedFlag | kStoppingFlag)) != 0) {
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
    message.joined = (flags & kJoinedFlag) != 0;
    message.stopping = (flags & kStoppingFlag) != 0;
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

TcpRoundLane::TcpRoundLane(int rank, std::vector<UniqueFd> connections, Logger logger)
    : rank_(rank),
      connections_(std::move(connections)),
      logger_(std::move(logger)),
      parsers_(connections_.size()),
      out_(connections_.size()),
      closed_(connections_.size(), false) {
  for (const UniqueFd& fd : connections_) {
    if (fd.valid()) open_fds_.push_back(fd.get());
  }
}

Status TcpRoundLane::SendToAll(const RoundMessage& message) {
  const std::string bytes = EncodeRoundMessage(message);
  for (size_t r = 0; r < connections_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || closed_[r]) continue;
    out_[r] += bytes;
    Flush(r);
  }
  return Status::Ok();
}

void TcpRoundLane::Flush(size_t peer) {
  size_t sent = 0;
  while (sent < out_[peer].size()) {
    IoResult io =
        SendSome(connections_[peer].get(), out_[peer].data() + sent, out_[peer].size() - sent);
    if (io.error != 0) {
      Close(peer, ErrnoText(io.error));
      return;
    }
    if (io.would_block()) break;  // the rest goes with a later Poll or SendToAll
    sent += io.bytes;
  }
  out_[peer].erase(0, sent);
}

void TcpRoundLane::Close(size_t peer, const std::string& why) {
  logger_->debug("fast path: rank {} closed its round connection{}", peer,
                 why.empty() ? std::string() : " (" + why + ")");
  closed_[peer] = true;
  out_[peer].clear();
  newly_closed_.push_back(static_cast<int>(peer));
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), connections_[peer].get()),
                  open_fds_.end());
}

Status TcpRoundLane::Poll(std::vector<std::pair<int, RoundMessage>>* out,
                          std::vector<int>* closed) {
  char buffer[4096];
  for (size_t r = 0; r < connections_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || closed_[r]) continue;
    if (!out_[r].empty()) Flush(r);
    while (!closed_[r]) {
      IoResult io = RecvSome(connections_[r].get(), buffer, sizeof(buffer));
      if (io.would_block()) break;
      if (io.eof || io.error != 0) {
        Close(r, io.error != 0 ? ErrnoText(io.error) : std::string());
        break;
      }
      Status fed = parsers_[r].Feed(buffer, io.bytes);
      if (!fed.ok()) return fed.WithContext("fast path: from rank " + std::to_string(r));
      std::vector<RoundMessage> messages;
      parsers_[r].Take(&messages);
      for (RoundMessage& m : messages) out->emplace_back(static_cast<int>(r), std::move(m));
      if (io.bytes < sizeof(buffer)) break;
    }
  }
  closed->insert(closed->end(), newly_closed_.begin(), newly_closed_.end());
  newly_closed_.clear();
  return Status::Ok();
}

}  // namespace kolo::transport
