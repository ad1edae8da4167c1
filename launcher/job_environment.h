// JobEnvironment: what kolorun gives each rank of a job: the job secret, the controller's
// address and the KOLO_* variables. Called by the launcher before it forks; no threads.
// The secret travels only in the environment, never on a command line (see DESIGN.md §6).
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::launcher {

struct JobLayout {
  int size = 1;  // number of ranks
  int controller_port = 0;
  std::string secret;  // 64 hex digits
  std::string job_id;  // "kolorun-" and 16 hex digits; names the job in every handshake
  std::string controller_host = "127.0.0.1";  // rank 0's host, as the other ranks reach it
  std::string start_timeout_seconds;          // KOLO_START_TIMEOUT_SECONDS; empty: not set
  // MASTER_PORT: the port of torch.distributed's store, which rank 0 hosts (env://, so that a
  // torch.distributed script runs under kolorun as under torchrun); 0: not set.
  int store_port = 0;
};

// Where one rank sits in the job.
struct RankIdentity {
  int rank = 0;
  int local_rank = 0;
  int local_size = 1;
  std::string hostname;  // KOLO_HOSTNAME; empty: not set (the runtime uses gethostname())
  // Horovod's cross communicator, as horovodrun numbers it: the ranks with this local rank,
  // one per host, in host order.
  int cross_rank = 0;
  int cross_size = 1;
  std::string host = "localhost";  // the host as the launcher names it (HOROVOD_HOSTNAME)
};

using EnvVar = std::pair<std::string, std::string>;

// 32 bytes from /dev/urandom as 64 lower-case hex digits; fresh on every call.
StatusOr<std::string> MakeJobSecret();

// A TCP port on 127.0.0.1 that was free a moment ago: binds port 0, reads the port the kernel
// chose and closes the socket. Rank 0's controller binds it soon after; a race with another
// program taking it in between is possible but unlikely.
StatusOr<int> FindFreePort();

// Builds two free ports (kolo's controller, torch.distributed's store) and a secret for a job
// of `size` ranks.
StatusOr<JobLayout> PrepareJob(int size);

// When kolorun's environment `base_env` ("NAME=value" entries) sets KOLO_SECRET_FILE, the
// job's secret is that file's (read with the runtime's checks, core/config/secret_file.h)
// instead of a fresh one, and KOLO_SECRET_FILE leaves `base_env`: every rank then gets the
// user's secret as KOLO_SECRET alone (a rank given both refuses to start). InvalidArgument
// naming the file and the fix when the file cannot be used.
Status UseUserSecretFile(std::vector<std::string>* base_env, JobLayout* job);

// The variables kolorun sets for one rank, in this order: KOLO_RANK, KOLO_SIZE,
// KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE, KOLO_CONTROLLER, KOLO_JOB_ID, then KOLO_HOSTNAME and
// KOLO_START_TIMEOUT_SECONDS where set, then what horovodrun exports to every rank and scripts
// read (before init, or to pick a device): HOROVOD_HOSTNAME, HOROVOD_RANK, HOROVOD_SIZE,
// HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE, HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE, then what
// torchrun exports for torch.distributed's env:// rendezvous: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR (rank 0's host) and, where set, MASTER_PORT. Not KOLO_SECRET,
// which each launch path passes its own way.
std::vector<EnvVar> RankVariables(const RankIdentity& who, const JobLayout& job);

// `base` without any variable named in `vars`, followed by `vars` as "NAME=value".
std::vector<std::string> MergeEnvironment(const std::vector<std::string>& base,
                                          const std::vector<EnvVar>& vars);

// The environment ("NAME=value" strings) of `rank` of a job on this host only (local rank =
// rank, cross rank 0 of 1): `base` without any variable kolorun sets, followed by
// RankVariables and KOLO_SECRET. kolo's own cross ranks are computed by the runtime from host
// names.
std::vector<std::string> RankEnvironment(const std::vector<std::string>& base, int rank,
                                         const JobLayout& job);

}  // namespace kolo::launcher
