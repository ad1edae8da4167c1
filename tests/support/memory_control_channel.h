// MemoryControlChannel: a worker's control stream in memory, for tests of what the background
// loop's collaborators send and receive (ControllerSession, RoundDriver): what was sent, what
// the controller "sent" (queued by the test), and a break that fails every later call once the
// queued messages are read, as a broken stream does.
#pragma once

#include <deque>
#include <vector>

#include "core/control_channel.h"

namespace kolo::testing {

class MemoryControlChannel final : public ControlChannel {
 public:
  StatusOr<std::vector<PeerInfo>> Connect(const Hello&, std::chrono::steady_clock::time_point,
                                          std::function<void()>) override {
    return std::vector<PeerInfo>{};
  }
  void SetFatalHandler(std::function<void(const Status&)>) override {}
  Status Send(const WorkerMessage& message) override {
    if (!broken_.ok()) return broken_;
    sent.push_back(message);
    return Status::Ok();
  }
  StatusOr<std::optional<ControllerMessage>> TryReceive() override {
    if (!inbox.empty()) {
      ControllerMessage next = inbox.front();
      inbox.pop_front();
      return std::optional<ControllerMessage>(std::move(next));
    }
    if (!broken_.ok()) return broken_;
    return std::optional<ControllerMessage>();
  }
  void Close(std::chrono::steady_clock::time_point) override {}
  std::string generation() const override { return "gen"; }

  void Break(Status why) { broken_ = std::move(why); }
  // Every request sent so far, in order, across batches.
  std::vector<Request> requests() const {
    std::vector<Request> out;
    for (const WorkerMessage& m : sent) out.insert(out.end(), m.requests.begin(), m.requests.end());
    return out;
  }
  int count(WorkerMessage::Kind kind) const {
    int n = 0;
    for (const WorkerMessage& m : sent) n += m.kind == kind ? 1 : 0;
    return n;
  }

  std::vector<WorkerMessage> sent;
  std::deque<ControllerMessage> inbox;

 private:
  Status broken_;
};

}  // namespace kolo::testing
