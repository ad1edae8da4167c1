// ElasticJoin: an elastic job's init() (kolo/elastic.h, docs/ELASTIC.md). Asks kolorun's
// elastic driver for this process's place in the next generation and fills the options a
// fixed-size job would have from its launcher; remembers the driver and the generation for
// kolo::elastic::poll_host_updates() and generation(). Process-wide state behind one mutex;
// thread-safe. Each call waits at most options.elastic_timeout_seconds.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo::internal {

// `options` with rank, size, controller address, host, job id and identity source of the
// generation the driver assigns this worker (the one after the last it belonged to). Fails
// with FailedPrecondition when the driver refuses it (no longer part of the job, the job is
// finishing: the message says which), DeadlineExceeded when no generation formed in time,
// Unavailable when the driver cannot be reached.
StatusOr<Options> JoinElasticGeneration(const Options& options);

// Whether `status` says the job lost a member (kAborted, kUnavailable, kDeadlineExceeded,
// kShutdown): what an elastic job answers by re-forming, unlike an error that would repeat (a
// bad argument, a mismatch).
bool LostMember(const Status& status);

// While an elastic generation starts on rank 0, asks kolorun's driver every 100 ms whether a
// member of the generation this process joined last is gone (exited, being stopped, or a newer
// generation formed), and calls `on_lost` once with the driver's words and the lost rank (-1 if
// not one rank) if so: rank 0 then
// aborts the start at once instead of waiting out KOLO_START_TIMEOUT_SECONDS for a rank that
// will never connect. The watch's own thread calls `on_lost`; destroying the watch stops and
// joins it. Driver errors are ignored (the start timeout still bounds the start).
class ElasticStartWatch {
 public:
  explicit ElasticStartWatch(std::function<void(const std::string&, int)> on_lost);
  ~ElasticStartWatch();
  ElasticStartWatch(const ElasticStartWatch&) = delete;
  ElasticStartWatch& operator=(const ElasticStartWatch&) = delete;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace kolo::internal
