#include "tests/support/local_job.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <optional>
#include <thread>

#include "core/free_port.h"

namespace kolo::testing {

int PickFreePort() {
  StatusOr<int> port = PickControllerPort();
  return port.ok() ? *port : -1;
}

LocalJob::LocalJob(int size, std::function<void(Options&)> tweak) {
  int port = PickFreePort();
  REQUIRE(port > 0);
  std::vector<std::optional<StatusOr<std::unique_ptr<Runtime>>>> created(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      Options options;
      options.rank = r;
      options.size = size;
      options.controller_address = "127.0.0.1:" + std::to_string(port);
      options.secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
      options.job_id = "local-job";
      options.timeout_seconds = 10;
      options.start_timeout_seconds = 20;
      if (tweak) tweak(options);
      created[r] = Runtime::Create(options);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    INFO("rank " << r << ": " << created[r]->status().ToString());
    REQUIRE(created[r]->ok());
    ranks_.push_back(std::move(*created[r]).value());
  }
}

LocalJob::~LocalJob() {
  ShutdownAll();
}

std::vector<std::string> LocalJob::RunOnAllRanks(const std::function<std::string(Runtime&)>& fn) {
  std::vector<std::string> results(ranks_.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = fn(*ranks_[r]); });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> failures;
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].empty()) failures.push_back("rank " + std::to_string(r) + ": " + results[r]);
  }
  return failures;
}

std::vector<Status> LocalJob::ShutdownAll() {
  std::vector<Status> statuses(ranks_.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    threads.emplace_back([this, r, &statuses] {
      if (ranks_[r]) statuses[r] = ranks_[r]->Shutdown();
    });
  }
  for (auto& t : threads) t.join();
  ranks_.clear();
  return statuses;
}

std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = "/tmp/" + prefix + "XXXXXX";
  const char* dir = mkdtemp(pattern.data());
  REQUIRE(dir != nullptr);
  return dir;
}

}  // namespace kolo::testing
