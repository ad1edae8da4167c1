// The simulated ranks of kolo-scale: N real GrpcControlChannels in one process, each with the
// Hello a rank sends, driven by a few threads that play the ranks' background threads. Each
// step every rank submits the model's gradients in one request batch (full metadata the first
// time, the cache ids the controller handed out after that: the controller path with the fast
// path off, KOLO_FAST_PATH=0) and waits for responses covering every one of them; nothing is
// executed (no data plane). Everything a rank receives is checked: identical peer tables,
// every gradient exactly once per step without error, and the same responses on every rank.
//
// Threading: Connect runs one thread per rank until the Welcome; Step and Shutdown run
// `drivers` threads, each owning the same fixed slice of the ranks (rank % drivers), so that
// every channel is used by one thread at a time as ControlChannel requires. The caller's
// thread calls Connect, Step and Shutdown in that order.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/messages.h"
#include "kolo/status.h"
#include "tools/bench/model_gradients.h"
#include "transport/auth/hmac_auth.h"

namespace kolo::scale {

struct StepCheck {
  int responses = 0;  // response messages' entries rank 0 received this step
  int tensors = 0;    // gradients every rank saw decided, each exactly once
};

class RankSwarm {
 public:
  RankSwarm(int size, int drivers, std::vector<bench::ModelTensor> gradients,
            transport::JobCredentials credentials, double timeout_seconds);
  ~RankSwarm();
  RankSwarm(const RankSwarm&) = delete;
  RankSwarm& operator=(const RankSwarm&) = delete;

  // Every rank opens its stream to `address(rank)` (the controller's, or its relay's) and says
  // hello; returns when every rank holds the peer table, having checked that the tables are
  // identical and complete.
  Status Connect(const std::function<std::string(int rank)>& address);
  // One training step's negotiation on every rank (see above); `deadline` bounds it.
  StatusOr<StepCheck> Step(std::chrono::steady_clock::time_point deadline);
  // Every rank sends its shutdown notice, waits for the job-wide Shutdown and closes.
  Status Shutdown(std::chrono::steady_clock::time_point deadline);

 private:
  struct Rank;
  struct Driver;
  // Runs `work(driver)` on every driver's thread; the first error, if any.
  Status OnDrivers(const std::function<Status(Driver&)>& work);
  // Sends `rank`'s request batch for the next step (and forgets the last step's decisions).
  Status Submit(Rank& rank);
  // Records what `message` tells `rank`; an error for anything a correct controller never says.
  Status Take(Rank& rank, const ControllerMessage& message);
  Status StepSlice(Driver& driver, std::chrono::steady_clock::time_point deadline);
  Status ShutdownSlice(Driver& driver, std::chrono::steady_clock::time_point deadline);

  const int size_;
  const std::vector<bench::ModelTensor> gradients_;
  const transport::JobCredentials credentials_;
  const double timeout_seconds_;
  std::unordered_map<std::string, size_t> index_;  // gradient name -> index; constant
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<std::unique_ptr<Driver>> drivers_;
  int steps_ = 0;
};

}  // namespace kolo::scale
