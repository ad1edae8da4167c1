// ElasticJoin: an elastic job's init() (kolo/elastic.h, docs/ELASTIC.md). Asks kolorun's
// elastic driver for this process's place in the next generation and fills the options a
// fixed-size job would have from its launcher; remembers the driver and the generation for
// kolo::elastic::poll_host_updates() and generation(). Process-wide state behind one mutex;
// thread-safe. Each call waits at most options.elastic_timeout_seconds.
#pragma once

#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo::internal {

// `options` with rank, size, controller address, host, job id and identity source of the
// generation the driver assigns this worker (the one after the last it belonged to). Fails
// with FailedPrecondition when the driver refuses it (no longer part of the job, the job is
// finishing: the message says which), DeadlineExceeded when no generation formed in time,
// Unavailable when the driver cannot be reached.
StatusOr<Options> JoinElasticGeneration(const Options& options);

}  // namespace kolo::internal
