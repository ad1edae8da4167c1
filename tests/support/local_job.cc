#include "tests/support/local_job.h"

#include <catch2/catch.hpp>
#include <optional>

#include "core/free_port.h"
#include "tests/support/rank_threads.h"

namespace kolo::testing {

int PickFreePort() {
  StatusOr<int> port = PickControllerPort();
  return port.ok() ? *port : -1;
}

LocalJob::LocalJob(int size, std::function<void(Options&)> tweak) {
  int port = PickFreePort();
  REQUIRE(port > 0);
  std::vector<std::optional<StatusOr<std::unique_ptr<Runtime>>>> created =
      RunOnRanks(size, [&](int r) -> std::optional<StatusOr<std::unique_ptr<Runtime>>> {
        Options options;
        options.rank = r;
        options.size = size;
        options.controller_address = "127.0.0.1:" + std::to_string(port);
        options.secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        options.job_id = "local-job";
        options.timeout_seconds = 10;
        options.start_timeout_seconds = 20;
        if (tweak) tweak(options);
        return Runtime::Create(options);
      });
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
  return Failures(RunOnRanks(size(), [&](int r) { return fn(*ranks_[r]); }));
}

std::vector<Status> LocalJob::ShutdownAll() {
  std::vector<Status> statuses =
      RunOnRanks(size(), [this](int r) { return ranks_[r] ? ranks_[r]->Shutdown() : Status(); });
  ranks_.clear();
  return statuses;
}

}  // namespace kolo::testing
