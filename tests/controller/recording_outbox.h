// RecordingOutbox: a ControllerOutbox for controller tests that records every message per rank
// and lets a test wait (with a deadline) for a count. Thread-safe: the Controller may send from
// its sequencer thread while the test thread reads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "core/controller_link.h"
#include "core/messages.h"

namespace kolo::controller::testing {

// A canonical one-line text of a message, so tests compare what ranks received as strings.
inline std::string Describe(const ControllerMessage& m) {
  std::ostringstream out;
  switch (m.kind) {
    case ControllerMessage::Kind::kWelcome:
      out << "welcome";
      for (const PeerInfo& p : m.peers)
        out << " [" << p.rank << " " << p.host << " " << p.data_address << "]";
      break;
    case ControllerMessage::Kind::kResponses:
      out << "responses";
      for (const Response& r : m.responses) {
        out << " {seq " << r.seq << " " << OpTypeName(r.op) << " " << DataTypeName(r.dtype) << " "
            << ReduceOpName(r.reduce_op) << " " << r.prescale << " " << r.postscale << " root "
            << r.root;
        for (size_t i = 0; i < r.names.size(); ++i) {
          out << " " << r.names[i] << "#" << r.cache_ids[i] << "x" << r.num_elements[i];
        }
        if (r.is_error()) out << " error: " << r.error;
        out << "}";
      }
      break;
    case ControllerMessage::Kind::kShutdown:
      out << "shutdown";
      break;
    case ControllerMessage::Kind::kAbort:
      out << "abort: " << m.reason;
      break;
    case ControllerMessage::Kind::kPong:
      out << "pong " << m.ping_unix_us;
      break;
  }
  return out.str();
}

class RecordingOutbox final : public ControllerOutbox {
 public:
  explicit RecordingOutbox(int size) : by_rank_(size) {}

  void Send(int rank, const ControllerMessage& message) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      by_rank_.at(rank).push_back(message);
      ++total_;
    }
    cv_.notify_all();
  }

  std::vector<ControllerMessage> For(int rank) const {
    std::lock_guard<std::mutex> lock(mu_);
    return by_rank_.at(rank);
  }

  // Descriptions of what `rank` received, in order.
  std::vector<std::string> Log(int rank) const {
    std::vector<std::string> lines;
    for (const ControllerMessage& m : For(rank)) lines.push_back(Describe(m));
    return lines;
  }

  size_t total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }

  // Waits until `rank` has received at least `count` messages; false if `limit` passed first.
  bool WaitFor(int rank, size_t count, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return by_rank_.at(rank).size() >= count; });
  }

  // Waits until `rank` has received `count` tensor names in response batches; false if `limit`
  // passed first.
  bool WaitForNames(int rank, size_t count, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] {
      size_t names = 0;
      for (const ControllerMessage& m : by_rank_.at(rank)) {
        for (const Response& r : m.responses) names += r.names.size();
      }
      return names >= count;
    });
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& messages : by_rank_) messages.clear();
    total_ = 0;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<ControllerMessage>> by_rank_;  // GUARDED_BY(mu_)
  size_t total_ = 0;                                     // GUARDED_BY(mu_)
};

}  // namespace kolo::controller::testing
