// Options: everything a kolo runtime is configured with. Filled from the environment by
// Options::FromEnvironment() or built by hand for init(Options). Plain value type.
//
// Defaults and ranges are written in one place, the config table (core/config/config_table.cc;
// `kolorun --help-env` prints it, and README.md's "Environment variables" table is a copy): a
// default-constructed Options holds every variable's default. The `{}` below only
// zero-initialises a field before the constructor sets it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// KOLO_TRANSPORT: the CPU allreduce and broadcast data path.
enum class Transport {
  kAuto,  // shm when every rank shares this host and there are several, else tcp
  kTcp,   // the TCP ring and chain
  kShm,   // shared memory; needs every rank on this host
};

// KOLO_SHM_SINGLE_COPY: whether the shared-memory allreduce copies straight between the ranks'
// tensors (cross-memory attach) where the host allows it (docs/DESIGN-NOTES.md, "Single copy").
enum class ShmSingleCopy {
  // For a job of two ranks that each have a core, when both may (a probe at init; else through
  // the segment's slots, with a warning naming the rank and why).
  kAuto,
  kOn,   // any job; init() fails where some rank may not, naming it and why
  kOff,  // never: always through the slots; nothing is probed
};

// KOLO_GPU_OPERATIONS: the data path of GPU tensors (README, "GPU tensors").
enum class GpuOperations {
  kAuto,  // nccl in a build with NCCL, else ring
  kNccl,  // NCCL collectives on the GPUs
  kRing,  // staged through page-locked host memory over the CPU data path (KOLO_TRANSPORT)
};

// KOLO_HIERARCHICAL (HOROVOD_HIERARCHICAL_ALLREDUCE): whether the CPU allreduces of a job whose
// hosts each run the same number (more than one) of ranks go hierarchically: a reduce-scatter
// within each host, an allreduce of each block across the hosts, an allgather within the host
// (docs/SCALE.md, "Hierarchical collectives"). A job on one host, one rank per host, or hosts
// with different numbers of ranks always runs flat.
enum class Hierarchical {
  kAuto,  // allreduces of 64 KiB and more (provisional: not yet measured between real hosts)
  kOn,    // every allreduce
  kOff,   // none: one flat ring or halving-doubling over every rank
};

struct Options {
  // Every field of the config table at its default.
  Options();

  // Identity of this process in the job (KOLO_RANK, KOLO_SIZE, KOLO_LOCAL_RANK/SIZE).
  int rank{};
  int size{};
  int local_rank{};  // -1: computed from the host names all ranks report
  int local_size{};  // -1: likewise

  // "host:port" of the controller that rank 0 hosts. Rank 0 listens on its port.
  std::string controller_address;  // KOLO_CONTROLLER
  // Where FromMap found the identity: "kolo", "torchrun", "Open MPI", "MPICH", "SLURM", or
  // empty (none: a one-rank job, or options built by hand). Logged at init.
  std::string identity_source;
  // How controller_address was chosen (e.g. "first host of SLURM_JOB_NODELIST, port derived
  // from SLURM_JOB_ID=42"); empty when it was not derived from the environment.
  std::string controller_source;
  // Variables of the environment FromMap read whose names are near misses of ones kolo reads
  // ("HOROVOD_FUSION_TRESHOLD", "kolo_timeout_seconds"), naming the likely intended variable,
  // then Horovod's variables kolo ignores (core/config/horovod_env.h), naming why: one sentence
  // each; init() logs each as a warning. FromEnvironment gives each one once per process (a
  // second init(), an elastic reset, does not repeat it). Empty for options built by hand.
  std::vector<std::string> environment_warnings;
  // Address other ranks use to reach this rank's data-plane listener. Empty: the address of
  // the interface that routes to the controller.
  std::string data_address;  // KOLO_DATA_ADDR
  // Host name reported to peers (groups ranks into local/cross sets). Empty: gethostname().
  std::string host;  // KOLO_HOSTNAME
  // Job secret (hex, at least 32 digits); kolorun makes a fresh 32-byte one per job. Every
  // control stream and data connection proves knowledge of it by HMAC (docs/SECURITY.md).
  // Never logged or quoted in errors. At most one of secret and secret_file.
  std::string secret;  // KOLO_SECRET
  // A file (mode 0600, owner only) holding the secret as hex; read at init().
  std::string secret_file;  // KOLO_SECRET_FILE
  // Names the job in every handshake, so that ranks of two jobs that share a secret still
  // refuse each other. Not secret. kolorun sets a fresh one; "" is allowed.
  std::string job_id;  // KOLO_JOB_ID
  // Without a secret, only single-host jobs run (with a warning); true runs multi-host jobs
  // without authentication too.
  bool insecure{};  // KOLO_INSECURE
  // TLS for the control plane (PEM paths): rank 0 serves with cert and key; workers verify it
  // against ca. All empty: plaintext gRPC.
  std::string tls_cert;  // KOLO_TLS_CERT
  std::string tls_key;   // KOLO_TLS_KEY
  std::string tls_ca;    // KOLO_TLS_CA

  // Tuning.
  int64_t fusion_threshold_bytes{};  // KOLO_FUSION_THRESHOLD
  double cycle_time_ms{};            // KOLO_CYCLE_TIME_MS
  int cache_capacity{};              // KOLO_CACHE_CAPACITY
  // Online tuning of the two above by rank 0 (core/autotuner.h).
  bool autotune{};                  // KOLO_AUTOTUNE
  std::string autotune_log;         // KOLO_AUTOTUNE_LOG
  int autotune_warmup_samples{};    // KOLO_AUTOTUNE_WARMUP_SAMPLES
  int autotune_steps_per_sample{};  // KOLO_AUTOTUNE_STEPS_PER_SAMPLE
  int autotune_samples{};           // KOLO_AUTOTUNE_SAMPLES

  // Deadlines, in seconds.
  double timeout_seconds{};        // KOLO_TIMEOUT_SECONDS: data-plane progress, liveness, shutdown
  double start_timeout_seconds{};  // KOLO_START_TIMEOUT_SECONDS: init() waiting for every rank

  // Timeline (docs/TIMELINE.md). Empty path: off until start_timeline().
  std::string timeline_path;    // KOLO_TIMELINE
  bool timeline_mark_cycles{};  // KOLO_TIMELINE_MARK_CYCLES
  int64_t timeline_max_mb{};    // KOLO_TIMELINE_MAX_MB

  // Stall inspector: warn when a tensor waits this long for some ranks (0: never); abort the
  // job when one has waited stall_shutdown_seconds (0: never).
  double stall_check_seconds{};     // KOLO_STALL_CHECK_SECONDS
  double stall_shutdown_seconds{};  // KOLO_STALL_SHUTDOWN_SECONDS

  // KOLO_LOG_LEVEL: one of the names the table lists (trace … off).
  std::string log_level;

  // KOLO_TRANSPORT. Must be the same on every rank.
  Transport transport{};

  // KOLO_SHM_SINGLE_COPY. Must be the same on every rank.
  ShmSingleCopy shm_single_copy{};

  // KOLO_HIERARCHICAL. Must be the same on every rank.
  Hierarchical hierarchical{};

  // KOLO_CPU_BIND: "core" when a launcher bound the ranks of this host to disjoint CPU sets
  // (kolorun does for the ranks it starts here): kolo then polls before sleeping even though
  // this process sees fewer CPUs than the host has ranks. "none": not known to be bound.
  std::string cpu_bind;

  // KOLO_WAIT_SPIN_US: a blocking call or synchronize() watches its op for this long (running
  // it itself while the background thread is idle), yielding the core between checks, before
  // it sleeps; only where every rank of the host has a core.
  int wait_spin_us{};

  // KOLO_FAST_PATH: repeated allreduces (docs/FAST-PATH.md): ranks agree among themselves on
  // which cached allreduces run next, without a round trip to the controller. Must be the same
  // on every rank (init() fails naming the rank that differs).
  bool fast_path{};

  // KOLO_EAGER_BYTES: with the fast path, a round message carries the inputs of this rank's
  // ready CPU allreduces of the job's set, up to this many bytes in all, and a round that
  // decides one whose every rank sent its input runs it from them, without the data plane
  // (docs/FAST-PATH.md, "Eager"). 0: never; -1 (unset): 4096 over TCP rounds, none through
  // shared memory. Ranks may differ (an op goes eager only where every rank sent its input).
  int eager_bytes{};

  // KOLO_P2P: the point-to-point connections (kolo/p2p.h, docs/P2P.md), one per pair of ranks,
  // made at init: "auto" up to 64 ranks, "on", "off". Must be the same on every rank.
  std::string p2p;

  // KOLO_CONTROL_RELAYS: "off", or "host": on every host but rank 0's, the host's local rank 0
  // runs a control relay (docs/DESIGN-NOTES.md, "Control relays") and the host's ranks open
  // their control streams to it instead of to the controller. Must be the same on every rank.
  std::string control_relays;

  // KOLO_GPU_OPERATIONS. Must be the same on every rank. Set explicitly (not auto), init()
  // also checks that a GPU is usable and fails naming the variable when it is not.
  GpuOperations gpu_operations{};

  // KOLO_PROCESS_SETS: process sets made at init, in this order (ids 1, 2, ...): sets
  // separated by ';', ranks by ',', e.g. "0,1;2,3". Must be the same on every rank (init()
  // fails on every rank when they disagree). Empty: none.
  std::string process_sets;

  // Elastic jobs (kolo/elastic.h, docs/ELASTIC.md), set by kolorun's elastic mode. With a
  // rendezvous address, every init() asks kolorun's elastic driver there for this process's rank,
  // size, controller and generation job id instead of reading them from the environment.
  std::string elastic_rendezvous;    // KOLO_ELASTIC_RENDEZVOUS: "host:port"
  std::string elastic_worker_id;     // KOLO_ELASTIC_WORKER_ID: "host:slot"
  double elastic_timeout_seconds{};  // KOLO_ELASTIC_TIMEOUT_SECONDS: init()'s wait for a generation

  // Reads the variables of the config table from the process environment.
  // Fails with a message naming the variable on a bad value. KOLO_SECRET is removed from the
  // environment once read (so that processes the program starts do not inherit it) and
  // remembered for later calls in this process. Not safe against threads that read or change
  // the environment at the same time (setenv/unsetenv are not).
  static StatusOr<Options> FromEnvironment();
  // Same, from an explicit map (for tests and for tools that build an environment).
  static StatusOr<Options> FromMap(const std::map<std::string, std::string>& env);

  // Checks every field against its range in the config table, then consistency (rank < size,
  // ...). init(Options) calls it. The error names the variable.
  Status Validate() const;
};

}  // namespace kolo
