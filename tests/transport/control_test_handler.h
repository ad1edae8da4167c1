// Test doubles for the control-plane tests: RecordingHandler, a ControllerHandler that records
// every call and welcomes the ranks once the expected number said hello; Waker, a `wake`
// function a test can wait on. Thread-safe: gRPC calls the handler from its stream threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/controller_link.h"
#include "transport/grpc/grpc_control_channel.h"

namespace kolo::transport::testing {

struct Recorded {
  std::map<int, Hello> hellos;
  std::vector<std::pair<int, WorkerMessage>> messages;
  std::map<int, Status> closed;
};

class RecordingHandler final : public ControllerHandler {
 public:
  // Hellos from kBusyHost are turned away for now (Unavailable), every time.
  static constexpr const char* kBusyHost = "busy-host";
  // Refuses hellos whose host is `refused_host` (a handler-level refusal, after authentication).
  explicit RecordingHandler(size_t ranks_to_welcome, std::string refused_host = "refused-host")
      : ranks_to_welcome_(ranks_to_welcome), refused_host_(std::move(refused_host)) {}
  void set_outbox(ControllerOutbox* outbox) { outbox_ = outbox; }  // before the first stream

  Status OnHello(const Hello& hello) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (hello.host == refused_host_) {
      return FailedPrecondition("rank " + std::to_string(hello.rank) + " is on a refused host");
    }
    if (hello.host == kBusyHost) {
      return Unavailable("rank " + std::to_string(hello.rank) + " is on a busy host");
    }
    recorded_.hellos[hello.rank] = hello;
    if (recorded_.hellos.size() == ranks_to_welcome_) {
      ControllerMessage welcome;
      welcome.kind = ControllerMessage::Kind::kWelcome;
      for (const auto& [rank, h] : recorded_.hellos) {
        welcome.peers.push_back({rank, h.host, h.data_address, h.machine});
      }
      for (const auto& [rank, h] : recorded_.hellos) outbox_->Send(rank, welcome);
    }
    changed_.notify_all();
    return Status::Ok();
  }
  void OnMessage(int rank, const WorkerMessage& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    recorded_.messages.emplace_back(rank, message);
    changed_.notify_all();
  }
  void OnStreamClosed(int rank, const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    recorded_.closed[rank] = why;
    changed_.notify_all();
  }

  // Waits until `done(recorded)` holds or `limit` passes; returns a copy of what was recorded.
  Recorded WaitUntil(const std::function<bool(const Recorded&)>& done,
                     std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, limit, [&] { return done(recorded_); });
    return recorded_;
  }

 private:
  const size_t ranks_to_welcome_;
  const std::string refused_host_;
  ControllerOutbox* outbox_ = nullptr;  // set before any stream starts
  std::mutex mu_;
  std::condition_variable changed_;
  Recorded recorded_;  // GUARDED_BY(mu_)
};

class Waker {
 public:
  std::function<void()> Function() {
    return [this] {
      {
        std::lock_guard<std::mutex> lock(mu_);
        woken_ = true;
      }
      cv_.notify_all();
    };
  }
  // TryReceive until a message or an error arrives, waiting for wake-ups up to `limit`.
  StatusOr<std::optional<ControllerMessage>> Receive(GrpcControlChannel& channel,
                                                     std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      StatusOr<std::optional<ControllerMessage>> next = channel.TryReceive();
      if (!next.ok() || next->has_value()) return next;
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_until(lock, deadline, [&] { return woken_; })) return next;
      woken_ = false;
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;  // GUARDED_BY(mu_)
};

}  // namespace kolo::transport::testing
