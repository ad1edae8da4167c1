// Helpers of the ElasticMembership tests (elastic_membership_test.cc,
// elastic_min_np_test.cc): configs, host lists, and Join with a deadline in the past, so that
// it answers at once (kPending if no generation formed). Single-threaded test code.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "launcher/elastic_membership.h"

namespace kolo::launcher {

using Clock = std::chrono::steady_clock;
using transport::ElasticAssignment;
using transport::ElasticOutcome;

inline ElasticMembership::Config MakeConfig(int initial, int min, int max) {
  ElasticMembership::Config config;
  config.initial_np = initial;
  config.min_np = min;
  config.max_np = max;
  config.elastic_timeout = std::chrono::milliseconds(10000);
  config.job_id = "kolorun-test";
  return config;
}

inline std::vector<Host> Hosts(std::vector<std::pair<std::string, int>> list) {
  std::vector<Host> hosts;
  for (auto& [name, slots] : list) hosts.push_back(Host{name, "", slots});
  return hosts;
}

inline std::vector<std::string> Ids(const std::vector<ElasticMembership::WorkerToStart>& slots) {
  std::vector<std::string> ids;
  for (const auto& slot : slots) ids.push_back(slot.worker_id);
  return ids;
}

inline ElasticAssignment Join(ElasticMembership& m, const std::string& id, int64_t last,
                              int port = 0) {
  transport::ElasticJoinRequest request{id, last, port};
  return m.Join(request, Clock::now() - std::chrono::seconds(1));
}

// The workers TakeWorkersToStop says to stop, each as "id: reason".
inline std::vector<std::string> Stops(ElasticMembership& m) {
  std::vector<std::string> stops;
  for (const auto& order : m.TakeWorkersToStop()) {
    stops.push_back(order.worker_id + ": " + order.reason);
  }
  return stops;
}

// Starts the slots the membership asks for and has each join generation 1.
inline std::vector<std::string> StartAndJoin(ElasticMembership& m) {
  std::vector<std::string> ids = Ids(m.TakeSlotsToFill(Clock::now()));
  for (size_t i = 0; i < ids.size(); ++i) Join(m, ids[i], 0, 5000 + static_cast<int>(i));
  return ids;
}

}  // namespace kolo::launcher
