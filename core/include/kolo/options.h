// Options: everything a kolo runtime is configured with. Filled from the environment by
// Options::FromEnvironment() (the table in core/config/config_table.cc lists every variable) or
// built by hand for init(Options). Plain value type.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kolo/status.h"

namespace kolo {

struct Options {
  // Identity of this process in the job.
  int rank = 0;
  int size = 1;
  int local_rank = -1;  // -1: computed from the host names all ranks report
  int local_size = -1;

  // "host:port" of the controller that rank 0 hosts. Rank 0 listens on its port.
  std::string controller_address;
  // Where FromMap found the identity: "kolo", "torchrun", "Open MPI", "MPICH", "SLURM", or
  // empty (none: a one-rank job, or options built by hand). Logged at init.
  std::string identity_source;
  // How controller_address was chosen (e.g. "first host of SLURM_JOB_NODELIST, port derived
  // from SLURM_JOB_ID=42"); empty when it was not derived from the environment.
  std::string controller_source;
  // Address other ranks use to reach this rank's data-plane listener. Empty: the address of
  // the interface that routes to the controller.
  std::string data_address;
  // Host name reported to peers (groups ranks into local/cross sets). Empty: gethostname().
  std::string host;
  // Job secret (hex, at least 32 digits); kolorun makes a fresh 32-byte one per job. Every
  // control stream and data connection proves knowledge of it by HMAC (docs/SECURITY.md).
  // Never logged or quoted in errors. At most one of secret and secret_file.
  std::string secret;
  // A file (mode 0600, owner only) holding the secret as hex; read at init().
  std::string secret_file;
  // Names the job in every handshake, so that ranks of two jobs that share a secret still
  // refuse each other. Not secret. kolorun sets a fresh one; "" is allowed.
  std::string job_id;
  // Without a secret, only single-host jobs run (with a warning); true runs multi-host jobs
  // without authentication too.
  bool insecure = false;
  // TLS for the control plane (PEM paths): rank 0 serves with cert and key; workers verify it
  // against ca. All empty: plaintext gRPC.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;

  // Tuning.
  int64_t fusion_threshold_bytes = 64 << 20;
  double cycle_time_ms = 1.0;
  int cache_capacity = 1024;

  // Deadlines, in seconds.
  double timeout_seconds = 30.0;        // data-plane progress, liveness, shutdown
  double start_timeout_seconds = 60.0;  // init(): waiting for every rank to connect

  // Timeline (docs/TIMELINE.md). Empty path: off until start_timeline().
  std::string timeline_path;
  bool timeline_mark_cycles = false;
  int64_t timeline_max_mb = 1024;

  // Stall inspector: warn when a tensor waits this long for some ranks (0: never); abort the
  // job when one has waited stall_shutdown_seconds (0: never).
  double stall_check_seconds = 60.0;
  double stall_shutdown_seconds = 0.0;

  // "trace", "debug", "info", "warning", "error", "off".
  std::string log_level = "warning";

  // CPU allreduce and broadcast data path: "shm" (shared memory; needs every rank on this
  // host), "tcp" (the TCP ring and chain) or "auto" (shm when every rank shares this host and there
  // are several, else tcp). Must be the same on every rank.
  std::string transport = "auto";

  // Fast path for repeated allreduces (docs/FAST-PATH.md): ranks agree among themselves on
  // which cached allreduces run next, without a round trip to the controller. Must be the same
  // on every rank (init() fails naming the rank that differs).
  bool fast_path = true;

  // Reads the variables of the config table from the process environment.
  // Fails with a message naming the variable on a bad value. KOLO_SECRET is removed from the
  // environment once read (so that processes the program starts do not inherit it) and
  // remembered for later calls in this process. Not safe against threads that read or change
  // the environment at the same time (setenv/unsetenv are not).
  static StatusOr<Options> FromEnvironment();
  // Same, from an explicit map (for tests and for tools that build an environment).
  static StatusOr<Options> FromMap(const std::map<std::string, std::string>& env);

  // Checks ranges and consistency (rank < size, ...). init(Options) calls it.
  Status Validate() const;
};

}  // namespace kolo
