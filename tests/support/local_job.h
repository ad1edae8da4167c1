// LocalJob: N kolo runtimes as threads of one test process, joined over real gRPC and real
// loopback sockets, for multi-rank tests. RunOnAllRanks runs a function on every rank at once
// and collects failures. Not thread-safe itself; call from the test's thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kolo/kolo.h"

namespace kolo::testing {

// A TCP port that was free a moment ago on 127.0.0.1.
int PickFreePort();

class LocalJob {
 public:
  // Creates `size` runtimes concurrently (Runtime::Create blocks until all have joined).
  // `tweak` may adjust each rank's options. REQUIREs success.
  explicit LocalJob(int size, std::function<void(Options&)> tweak = nullptr);
  ~LocalJob();  // shuts every rank down concurrently

  int size() const { return static_cast<int>(ranks_.size()); }
  Runtime& rank(int r) { return *ranks_[r]; }

  // Runs fn(rank) on `size` threads and waits for all. Catch2 assertions are not
  // thread-safe, so fn reports a failure by returning its text ("" for success); the result
  // lists "rank N: <text>" for each failing rank, for the test to CHECK on its own thread.
  std::vector<std::string> RunOnAllRanks(const std::function<std::string(Runtime&)>& fn);

  // Shuts every rank down concurrently and returns their statuses.
  std::vector<Status> ShutdownAll();

 private:
  std::vector<std::unique_ptr<Runtime>> ranks_;
};

}  // namespace kolo::testing
