#include "core/config/config_table.h"

#include <cstdlib>
#include <iterator>
#include <sstream>

#include "core/check.h"
#include "core/config/config_builder.h"
#include "core/config/horovod_env.h"

namespace kolo {
namespace {

using config_internal::Row;

// KOLO_TRANSPORT's values, indexed by Transport.
constexpr const char* kTransportNames[] = {"auto", "tcp", "shm"};
// KOLO_SHM_SINGLE_COPY's values, indexed by ShmSingleCopy.
constexpr const char* kShmSingleCopyNames[] = {"auto", "on", "off"};
// KOLO_HIERARCHICAL's values, indexed by Hierarchical.
constexpr const char* kHierarchicalNames[] = {"auto", "on", "off"};
// KOLO_GPU_OPERATIONS's values, indexed by GpuOperations.
constexpr const char* kGpuOperationsNames[] = {"auto", "nccl", "ring"};
constexpr const char* kLogLevels[] = {"trace", "debug", "info", "warning", "error", "fatal", "off"};
constexpr int64_t kMaxRanks = int64_t{1} << 20;

std::vector<ConfigVar> BuildTable() {
  return {
      // The identity rows are filled by core/config/launcher_env.cc, which also reads the
      // launchers'
      // own variables (torchrun, Open MPI, MPICH, SLURM); see the note FormatConfigTable prints.
      Row("KOLO_RANK")
          .Integer(&Options::rank, 0, kMaxRanks - 1, 0)
          .Unset("from the launcher")
          .Help("Rank of this process, below KOLO_SIZE (kolorun sets it)."),
      Row("KOLO_SIZE")
          .Integer(&Options::size, 1, kMaxRanks, 1)
          .Unset("from the launcher")
          .Help("Number of ranks in the job."),
      Row("KOLO_LOCAL_RANK")
          .OptionalInteger(&Options::local_rank, 0, kMaxRanks - 1)
          .Unset("from the launcher, else from host names")
          .Help("Index of this rank among the ranks on its host, below KOLO_LOCAL_SIZE."),
      Row("KOLO_LOCAL_SIZE")
          .OptionalInteger(&Options::local_size, 1, kMaxRanks)
          .Unset("from the launcher, else from host names")
          .Help("Number of ranks on this host, at most KOLO_SIZE."),
      Row("KOLO_CONTROLLER")
          .HostPort(&Options::controller_address)
          .Unset("MASTER_ADDR:MASTER_PORT, else the launcher's rule")
          .Help("Address of the controller; rank 0 listens on its port."),
      Row("KOLO_CONTROLLER_PORT")
          .Port()
          .Unset("MASTER_PORT, else derived from the launcher's job id")
          .Help("Controller port when the host comes from MASTER_ADDR or the launcher's rule."),
      Row("KOLO_DATA_ADDR")
          .IpAddress(&Options::data_address)
          .Unset("interface routing to the controller")
          .Help("Address peers use to reach this rank's data-plane port."),
      Row("KOLO_HOSTNAME", {"HOROVOD_HOSTNAME"})
          .Text(&Options::host, "text")
          .Unset("gethostname()")
          .Help("Host name reported to peers; groups ranks into local sets."),
      Row("KOLO_SECRET")
          .Secret(&Options::secret, 32)
          .Unset("none")
          .Help("Job secret; kolorun makes a fresh 32-byte one per job. Every connection proves "
                "it by HMAC. Removed from the environment once read; never logged."),
      Row("KOLO_SECRET_FILE")
          .Text(&Options::secret_file, "file path")
          .Unset("none")
          .Help("File (mode 0600) holding the job secret as hex; instead of KOLO_SECRET."),
      Row("KOLO_JOB_ID")
          .Text(&Options::job_id, "text", 256)
          .Unset("empty")
          .Help("Job name bound into every handshake; kolorun sets a fresh one per job. Not "
                "secret."),
      Row("KOLO_INSECURE")
          .Bool(&Options::insecure, false)
          .Help("1: let a multi-host job run without a secret (single-host jobs run with a "
                "warning)."),
      Row("KOLO_TLS_CERT")
          .Text(&Options::tls_cert, "PEM file path")
          .Unset("off")
          .Help("TLS certificate rank 0's controller serves (with KOLO_TLS_KEY)."),
      Row("KOLO_TLS_KEY")
          .Text(&Options::tls_key, "PEM file path")
          .Unset("off")
          .Help("Private key of KOLO_TLS_CERT."),
      Row("KOLO_TLS_CA")
          .Text(&Options::tls_ca, "PEM file path")
          .Unset("off")
          .Help("CA that workers verify the controller's certificate against; set: the control "
                "plane uses TLS."),
      Row("KOLO_FUSION_THRESHOLD", {"HOROVOD_FUSION_THRESHOLD"})
          .ByteSize(&Options::fusion_threshold_bytes, 0, int64_t{4} << 30, int64_t{64} << 20)
          .Help("Ready tensors are fused into one transfer up to this many bytes (K/M/G "
                "suffixes); 0 disables fusion."),
      Row("KOLO_CYCLE_TIME_MS", {"HOROVOD_CYCLE_TIME"})
          .Number(&Options::cycle_time_ms, 0, 1000, 1, "ms")
          .Help("Once a tensor is ready, the controller waits at most this long for more to "
                "fuse, while some are announced by some ranks only (else it plans at once)."),
      Row("KOLO_AUTOTUNE", {"HOROVOD_AUTOTUNE"})
          .Bool(&Options::autotune, false)
          .Help("1: rank 0 tunes KOLO_FUSION_THRESHOLD and KOLO_CYCLE_TIME_MS, and with "
                "KOLO_HIERARCHICAL=auto on several hosts the size from which allreduces run "
                "hierarchically, while the job trains, from the allreduce throughput it "
                "measures, then keeps the best (a climb along doubling steps; logged). Set it "
                "on every rank."),
      Row("KOLO_AUTOTUNE_LOG", {"HOROVOD_AUTOTUNE_LOG"})
          .Text(&Options::autotune_log, "file path")
          .Unset("none")
          .Help("With KOLO_AUTOTUNE: rank 0 writes each setting it scored here, as CSV."),
      Row("KOLO_AUTOTUNE_WARMUP_SAMPLES", {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES"})
          .Integer(&Options::autotune_warmup_samples, 0, 1000, 3)
          .Help("With KOLO_AUTOTUNE: samples dropped at the start, before any is scored."),
      Row("KOLO_AUTOTUNE_STEPS_PER_SAMPLE", {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE"})
          .Integer(&Options::autotune_steps_per_sample, 1, 100000, 10)
          .Help("With KOLO_AUTOTUNE: a sample ends when some tensor has been allreduced this "
                "many times in it (training steps, with one allreduce per gradient)."),
      Row("KOLO_AUTOTUNE_SAMPLES")
          .Integer(&Options::autotune_samples, 1, 1000, 3)
          .Help("With KOLO_AUTOTUNE: a setting's score is the median of this many samples."),
      Row("KOLO_CACHE_CAPACITY", {"HOROVOD_CACHE_CAPACITY"})
          .Integer(&Options::cache_capacity, 0, 1000000, 1024)
          .Help("Tensors whose metadata is cached and announced by a short id; 0 disables the "
                "cache."),
      Row("KOLO_TIMEOUT_SECONDS", {"HOROVOD_GLOO_TIMEOUT_SECONDS"})
          .Number(&Options::timeout_seconds, 0.1, 86400, 30, "s")
          .Help("Deadline for data-plane progress, liveness of peers and shutdown (the role of "
                "Horovod's Gloo timeout)."),
      Row("KOLO_START_TIMEOUT_SECONDS", {"HOROVOD_START_TIMEOUT"})
          .Number(&Options::start_timeout_seconds, 0.1, 86400, 60, "s")
          .Help("How long init() waits for every rank to connect."),
      Row("KOLO_TIMELINE", {"HOROVOD_TIMELINE"})
          .Text(&Options::timeline_path, "file path")
          .Unset("off")
          .Help("Write a Chrome-trace timeline to this path, each rank's with .rank and its "
                "number before the extension (t.json: t.rank0.json, t.rank1.json, ...). "
                "DYNAMIC: off until start_timeline(), as in Horovod."),
      Row("KOLO_TIMELINE_MARK_CYCLES", {"HOROVOD_TIMELINE_MARK_CYCLES"})
          .Bool(&Options::timeline_mark_cycles, false)
          .Help("Mark each controller planning cycle in the timeline."),
      Row("KOLO_TIMELINE_MAX_MB")
          .Integer<int64_t>(&Options::timeline_max_mb, 1, 1 << 20, 1024, "MiB")
          .Help("Stop writing a rank's timeline once its file reaches this size."),
      Row("KOLO_STALL_CHECK_SECONDS", {"HOROVOD_STALL_CHECK_TIME_SECONDS"})
          .Number(&Options::stall_check_seconds, 0, 86400, 60, "s")
          .Help("Warn when a tensor has waited this long for some ranks to submit it; 0 "
                "disables."),
      Row("KOLO_STALL_SHUTDOWN_SECONDS", {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"})
          .Number(&Options::stall_shutdown_seconds, 0, 86400, 1800, "s")
          .Help("Abort the job when a tensor has waited this long for some ranks, so that ops "
                "only some ranks submitted end in an error instead of waiting forever (30 "
                "min: torch.distributed's default timeout); 0 never aborts."),
      Row("KOLO_LOG_LEVEL", {"HOROVOD_LOG_LEVEL"})
          .Choice(&Options::log_level, {std::begin(kLogLevels), std::end(kLogLevels)}, "warning")
          .Help("Level of kolo's messages on stderr. Any case (Horovod's INFO is info)."),
      Row("KOLO_PROCESS_SETS")
          .RankLists(&Options::process_sets)
          .Unset("none")
          .Help("Process sets made at init, ids 1, 2, ... in order: sets separated by ';', "
                "ranks by ',' (\"0,1;2,3\"; spaces and a trailing ';' allowed). Each is "
                "checked as add_process_set() checks one: no rank twice, no set twice, not the "
                "global set. The same on every rank."),
      Row("KOLO_ELASTIC_RENDEZVOUS")
          .HostPort(&Options::elastic_rendezvous)
          .Unset("none (not elastic)")
          .Help("Set by kolorun in an elastic job (--min-np, --max-np, "
                "--host-discovery-script): the address of its elastic driver, which init() asks "
                "for this process's rank, size and controller."),
      Row("KOLO_ELASTIC_WORKER_ID")
          .Text(&Options::elastic_worker_id, "text")
          .Unset("none")
          .Help("Set by kolorun in an elastic job: this process's name for its driver."),
      Row("KOLO_ELASTIC_TIMEOUT_SECONDS", {"HOROVOD_ELASTIC_TIMEOUT"})
          .Number(&Options::elastic_timeout_seconds, 1, 86400, 600, "s")
          .Help("In an elastic job, how long init() waits for the driver to form the next "
                "generation (kolorun sets it from --elastic-timeout)."),
      Row("KOLO_TRANSPORT")
          .Enum(&Options::transport, kTransportNames, Transport::kAuto)
          .Help(
              "CPU allreduce, broadcast, allgather, reducescatter and alltoall data path: shm "
              "(shared memory; every rank on this host, else init() fails), tcp (the TCP ring and "
              "chain), or auto (shm when several ranks share one host and no other, tcp "
              "otherwise); tcp also sends point-to-point's larger tensors over the connection "
              "instead of one copy from the sender's memory. Same on every rank."),
      Row("KOLO_SHM_SINGLE_COPY")
          .Enum(&Options::shm_single_copy, kShmSingleCopyNames, ShmSingleCopy::kAuto)
          .Help("Shared-memory allreduces of 256 KiB and more (at most 8 MiB of them out of "
                "place on any rank) copy straight between the ranks' tensors "
                "(process_vm_readv/writev): auto (where every rank may, a warning where one may "
                "not: every op in a job of two ranks with a core each, none for two sharing a "
                "core, ops of at most 16 MiB in larger jobs), on (every op of any job; init() "
                "fails where some rank may not, naming it and why), off (always through the "
                "segment's slots). Same on every rank."),
      Row("KOLO_HIERARCHICAL", {"HOROVOD_HIERARCHICAL_ALLREDUCE"})
          .Enum(&Options::hierarchical, kHierarchicalNames, Hierarchical::kAuto)
          .SwitchValues(&Options::hierarchical, Hierarchical::kOn, Hierarchical::kOff)
          .Help("CPU allreduces, allgathers and reducescatters of a job (or a process set) "
                "whose hosts each run the same number (> 1) of its ranks: an allreduce as a "
                "reduce-scatter within each "
                "host, an allreduce of each rank's block across the hosts, an allgather within "
                "the host; an allgather across the hosts, then within each host; a "
                "reducescatter within each host, then across the hosts. on (or 1): every "
                "allreduce, allgather and reducescatter, and broadcasts (across the hosts, then "
                "within each); auto: allreduces, allgathers and reducescatters of 64 KiB and "
                "more (provisional, not yet measured between real hosts; KOLO_AUTOTUNE tunes "
                "that size for allreduces); off (or 0): flat rings, halving-doubling and the "
                "broadcast chain over all ranks. Same on every rank."),
      Row("KOLO_FAST_PATH")
          .Bool(&Options::fast_path, true)
          .Help("1: CPU allreduces, broadcasts, allgathers, reducescatters and alltoalls (grouped "
                "or not) and barriers seen before (cached; an alltoall with the same splits) are "
                "agreed on among the ranks, without a round trip to the controller; 0: every op "
                "goes through the controller. Same on every rank."),
      Row("KOLO_EAGER_BYTES")
          .OptionalInteger(&Options::eager_bytes, 0, 65536)
          .Unset("4096 over TCP rounds, 0 through shared memory")
          .Help("With KOLO_FAST_PATH, up to 8 ranks: the inputs of cached CPU allreduces (of "
                "the job, not of a process set) ride in the round message that agrees on them, "
                "up to this many bytes a message; an allreduce whose every rank's input came so "
                "runs without the data plane. Unset: 4096 over TCP rounds, none through shared "
                "memory (slower there, measured); 0: never."),
      Row("KOLO_P2P")
          .Choice(&Options::p2p, {"auto", "on", "off"}, "auto")
          .Help("point-to-point sends and receives (docs/P2P.md) run on connections of their own, "
                "one per pair of ranks, made at init: auto makes them in jobs of up to 64 ranks, "
                "on in any job, off never (point-to-point ops then fail at once saying so). Same "
                "on every rank."),
      Row("KOLO_CONTROL_RELAYS")
          .Choice(&Options::control_relays, {"off", "host"}, "off")
          .Help("host: on every host but rank 0's, the host's local rank 0 runs a control relay "
                "that the host's ranks open their control streams to, so that rank 0's "
                "controller reads and writes one message per host a step instead of one per "
                "rank (docs/SCALE.md). Needs KOLO_LOCAL_RANK and KOLO_LOCAL_SIZE (kolorun sets "
                "them) and each host's ranks consecutive; otherwise, or with TLS, the ranks "
                "connect directly and say why. off: every rank connects to the controller. Same "
                "on every rank."),
      Row("KOLO_CPU_BIND")
          .Choice(&Options::cpu_bind, {"none", "core"}, "none")
          .Help("core: the ranks of this host are bound to CPU sets of their own (kolorun binds "
                "its local ranks so and sets this; say it yourself after mpirun --bind-to core), "
                "so kolo's short polls stay on although each rank sees fewer CPUs than the host "
                "has ranks. none: they are on only while the host's ranks fit in the CPUs this "
                "process may use."),
      Row("KOLO_WAIT_SPIN_US")
          .Integer(&Options::wait_spin_us, 0, 10000, 1000, "us")
          .Help("A blocking call runs its op on the calling thread while the background "
                "thread is idle, or polls it (yielding the core), this long before it sleeps; "
                "synchronize() polls. Where the host's ranks outnumber its cores kolo sets the "
                "time itself: 300 us up to 8 ranks on the cores, 150 us a rank beyond, at most "
                "10 ms, counting every rank of the job on this machine's kernel whose CPUs "
                "overlap this rank's, whatever host name it reports (containers and namespaces "
                "of one machine; measured, docs/PERFORMANCE.md). A small op then returns "
                "without a thread hand-off, and a peer that calls up to this much later finds "
                "this rank awake. 0: always hand over and sleep."),
      Row("KOLO_GPU_OPERATIONS", {"HOROVOD_GPU_OPERATIONS"})
          .Enum(&Options::gpu_operations, kGpuOperationsNames, GpuOperations::kAuto)
          .Help("Data path of GPU tensors: nccl (NCCL collectives), ring (staged through host "
                "memory over KOLO_TRANSPORT's CPU path), or auto (nccl in a build with NCCL, "
                "else ring). Set explicitly, init() fails unless a GPU is usable. Any case. Same "
                "on every rank."),
  };
}

// A markdown table cell: '|' would end it.
std::string Cell(const std::string& text) {
  std::string cell;
  for (char c : text) cell += c == '|' ? std::string("\\|") : std::string(1, c);
  return cell;
}

}  // namespace

const std::vector<ConfigVar>& ConfigTable() {
  static const std::vector<ConfigVar> table = BuildTable();
  return table;
}

const ConfigVar& FindConfigVar(const std::string& name) {
  for (const ConfigVar& var : ConfigTable()) {
    if (name == var.name) return var;
  }
  // Programmer error: a caller names a variable the table lacks.
  KOLO_CHECK(false) << "no config table row named " << name;
  std::abort();  // not reached; tells the compiler no value is missing
}

const Options& DefaultOptions() {
  static const Options defaults;
  return defaults;
}

Status CheckConfigRanges(const Options& options) {
  for (const ConfigVar& var : ConfigTable()) KOLO_RETURN_IF_ERROR(var.check(options));
  return Status::Ok();
}

std::vector<std::string> ConfigTableMarkdownRows() {
  std::vector<std::string> rows = {"| variable (aliases) | default | range | meaning |",
                                   "|---|---|---|---|"};
  for (const ConfigVar& var : ConfigTable()) {
    std::string names = "`" + std::string(var.name) + "`";
    if (!var.aliases.empty()) {
      names += " (";
      for (size_t i = 0; i < var.aliases.size(); ++i) {
        names += (i ? ", `" : "`") + std::string(var.aliases[i]) + "`";
      }
      names += ")";
    }
    rows.push_back("| " + names + " | " + Cell(var.default_text) + " | " + Cell(var.range) + " | " +
                   Cell(var.help) + " |");
  }
  return rows;
}

std::string FormatConfigTable() {
  std::ostringstream out;
  out << "kolo reads these environment variables (aliases in parentheses; the KOLO_ name "
         "wins):\n\n";
  for (const std::string& row : ConfigTableMarkdownRows()) out << row << "\n";
  out << "\nWithout KOLO_RANK and KOLO_SIZE, rank and size come from the first launcher that "
         "sets\n"
         "them: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), Open MPI\n"
         "(OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), MPICH/Hydra (PMI_RANK,\n"
         "PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS) or SLURM (SLURM_PROCID, SLURM_NTASKS,\n"
         "SLURM_LOCALID). Without KOLO_CONTROLLER, MASTER_ADDR and MASTER_PORT are used, else\n"
         "the first node of the SLURM node list, or loopback for a one-host MPI job, with a\n"
         "port derived from the launcher's job id (README: Running under mpirun/SLURM).\n\n";
  out << kConfigValueGrammar << "\n\n";
  out << "Horovod's variables (core/config/horovod_env.cc; each warning or refusal names the "
         "variable and why):\n\n";
  for (const std::string& row : HorovodVariablesMarkdownRows()) out << row << "\n";
  return out.str();
}

const char* TransportName(Transport transport) {
  const auto index = static_cast<size_t>(transport);
  return index < std::size(kTransportNames) ? kTransportNames[index] : "invalid";
}

const char* GpuOperationsName(GpuOperations operations) {
  const auto index = static_cast<size_t>(operations);
  return index < std::size(kGpuOperationsNames) ? kGpuOperationsNames[index] : "invalid";
}

StatusOr<Transport> TransportFromName(const std::string& name) {
  Options options;
  KOLO_RETURN_IF_ERROR(FindConfigVar("KOLO_TRANSPORT").apply("KOLO_TRANSPORT", name, &options));
  return options.transport;
}

}  // namespace kolo
