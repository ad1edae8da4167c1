// Helpers for the data-mesh tests: N thread-ranks that listen and connect a TcpMesh each, and
// PatternExchange, a StreamExchange that sends and checks a per-(sender, receiver) byte pattern.
// Used by tests/transport/tcp_mesh_test.cc only; test threads use their own objects.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/data_plane.h"
#include "core/logging.h"
#include "transport/tcp/tcp_mesh.h"

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

// Runs fn(rank) on one thread per rank and joins them all.
inline void RunRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

inline TcpMesh::Config MeshConfig(int rank, int size, double timeout_seconds = 10) {
  TcpMesh::Config config;
  config.rank = rank;
  config.size = size;
  config.auth.credentials = {"test-key", "test-job"};
  config.timeout_seconds = timeout_seconds;
  config.logger = MakeLogger(rank, "transport", spdlog::level::warn);
  return config;
}

// Listens on n meshes; returns them with their addresses (nullptr and empty on failure).
inline std::vector<std::unique_ptr<TcpMesh>> ListenAll(int n, double timeout_seconds,
                                                       std::vector<std::string>* addresses) {
  std::vector<std::unique_ptr<TcpMesh>> meshes;
  for (int r = 0; r < n; ++r) {
    StatusOr<std::unique_ptr<TcpMesh>> mesh = TcpMesh::Listen(MeshConfig(r, n, timeout_seconds));
    if (!mesh.ok()) return {};
    addresses->push_back((*mesh)->listen_address());
    meshes.push_back(std::move(mesh).value());
  }
  return meshes;
}

// Connects all meshes concurrently; returns each rank's Connect status.
inline std::vector<Status> ConnectAll(const std::vector<std::unique_ptr<TcpMesh>>& meshes,
                                      const std::vector<std::string>& addresses,
                                      std::chrono::seconds limit = std::chrono::seconds(10)) {
  std::vector<Status> results(meshes.size());
  const auto deadline = std::chrono::steady_clock::now() + limit;
  RunRanks(static_cast<int>(meshes.size()),
           [&](int r) { results[r] = meshes[r]->Connect(addresses, deadline); });
  return results;
}

}  // namespace kolo::transport::testing
