// PatternExchange: a StreamExchange that sends and checks a per-(sender, receiver) byte
// pattern, for the data-mesh tests (the meshes themselves: tests/support/loopback_mesh.h).
// One object per rank thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/data_plane.h"

namespace kolo::transport::testing {

inline uint8_t PatternByte(int from, int to, size_t i) {
  return static_cast<uint8_t>(from * 131 + to * 31 + i * 7 + (i >> 10));
}

// Sends `send_bytes` of the (self → send_to) pattern and receives `recv_bytes` into a buffer,
// in chunks of at most `chunk`. With a finite `lead`, at most `lead` bytes beyond those
// received so far are offered for sending, like a ring that forwards what it got.
class PatternExchange final : public StreamExchange {
 public:
  static constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

  PatternExchange(int self, int send_to, size_t send_bytes, size_t recv_bytes,
                  size_t chunk = 64 << 10, size_t lead = kNoLimit)
      : send_(send_bytes), recv_(recv_bytes), chunk_(chunk), lead_(lead) {
    for (size_t i = 0; i < send_bytes; ++i) send_[i] = PatternByte(self, send_to, i);
  }
  size_t send_total() const override { return send_.size(); }
  size_t recv_total() const override { return recv_.size(); }
  ConstBytes NextSend() override {
    size_t ready = send_.size();
    if (lead_ != kNoLimit) ready = std::min(ready, received_ + lead_);
    if (ready <= sent_) return {};
    return {send_.data() + sent_, std::min(chunk_, ready - sent_)};
  }
  void OnSent(size_t n) override { sent_ += n; }
  MutableBytes NextRecv() override {
    return {recv_.data() + received_, std::min(chunk_, recv_.size() - received_)};
  }
  void OnReceived(size_t n) override {
    received_ += n;
    if (on_received_) on_received_(received_);
  }

  // Empty if the received bytes are the (from → to) pattern, else where they differ.
  std::string Check(int from, int to) const {
    if (received_ != recv_.size()) return "received " + std::to_string(received_) + " bytes";
    for (size_t i = 0; i < recv_.size(); ++i) {
      if (recv_[i] != PatternByte(from, to, i)) return "byte " + std::to_string(i) + " differs";
    }
    return "";
  }
  // Called with the running total after every OnReceived.
  void set_on_received(std::function<void(size_t)> f) { on_received_ = std::move(f); }

 private:
  std::vector<uint8_t> send_;
  std::vector<uint8_t> recv_;
  const size_t chunk_;
  const size_t lead_;
  size_t sent_ = 0;
  size_t received_ = 0;
  std::function<void(size_t)> on_received_;
};

}  // namespace kolo::transport::testing
