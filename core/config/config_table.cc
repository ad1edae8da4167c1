#include "core/config/config_table.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "core/logging.h"

namespace kolo {
namespace {

Status BadValue(const std::string& source, const std::string& value, const std::string& want) {
  return InvalidArgument(source + "='" + value + "' is invalid: expected " + want);
}

Status ParseInt(const std::string& source, const std::string& value, int64_t lo, int64_t hi,
                int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) {
    return BadValue(source, value,
                    "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v;
  return Status::Ok();
}

Status ParseDouble(const std::string& source, const std::string& value, double lo, double hi,
                   double* out) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
    std::ostringstream want;
    want << "a number in [" << lo << ", " << hi << "]";
    return BadValue(source, value, want.str());
  }
  *out = v;
  return Status::Ok();
}

template <int64_t kLo, int64_t kHi, int Options::*kField>
Status ApplyInt(const std::string& source, const std::string& value, Options* options) {
  int64_t v = 0;
  KOLO_RETURN_IF_ERROR(ParseInt(source, value, kLo, kHi, &v));
  options->*kField = static_cast<int>(v);
  return Status::Ok();
}

template <std::string Options::*kField>
Status ApplyString(const std::string& source, const std::string& value, Options* options) {
  options->*kField = value;
  return Status::Ok();
}

Status ApplyController(const std::string& source, const std::string& value, Options* options) {
  size_t colon = value.rfind(':');
  int64_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !ParseInt(source, value.substr(colon + 1), 1, 65535, &port).ok()) {
    return BadValue(source, value, "host:port with a port in [1, 65535]");
  }
  options->controller_address = value;
  return Status::Ok();
}

// Checked only: launcher_env composes the port into controller_address.
Status ApplyControllerPort(const std::string& source, const std::string& value, Options*) {
  int64_t port = 0;
  return ParseInt(source, value, 1, 65535, &port);
}

// The secret's value never appears in a message, not even when it is malformed.
Status ApplySecret(const std::string& source, const std::string& value, Options* options) {
  const size_t bad = value.find_first_not_of("0123456789abcdefABCDEF");
  if (bad != std::string::npos || value.size() % 2 != 0 || value.size() < 32) {
    const std::string why = bad != std::string::npos
                                ? "character " + std::to_string(bad + 1) + " is not a hex digit"
                                : "got " + std::to_string(value.size()) + " digits";
    return InvalidArgument(source + " is invalid (value not shown): expected at least 32 hex " +
                           "digits in pairs; " + why);
  }
  options->secret = value;
  return Status::Ok();
}

Status ApplyJobId(const std::string& source, const std::string& value, Options* options) {
  if (value.size() > 256) return BadValue(source, value.substr(0, 32) + "...", "at most 256 bytes");
  options->job_id = value;
  return Status::Ok();
}

Status ApplyFusion(const std::string& source, const std::string& value, Options* options) {
  StatusOr<int64_t> bytes = ParseByteSize(value);
  if (!bytes.ok() || *bytes > (int64_t{4} << 30)) {
    return BadValue(source, value, "a byte size in [0, 4G] such as 67108864, 64M or 1G");
  }
  options->fusion_threshold_bytes = *bytes;
  return Status::Ok();
}

Status ApplyCycle(const std::string& source, const std::string& value, Options* options) {
  return ParseDouble(source, value, 0.0, 1000.0, &options->cycle_time_ms);
}

Status ApplyTimeout(const std::string& source, const std::string& value, Options* options) {
  return ParseDouble(source, value, 0.1, 86400.0, &options->timeout_seconds);
}

Status ApplyStartTimeout(const std::string& source, const std::string& value, Options* options) {
  return ParseDouble(source, value, 0.1, 86400.0, &options->start_timeout_seconds);
}

Status ApplyBool(const std::string& source, const std::string& value, bool* out) {
  if (value == "1" || value == "true") {
    *out = true;
  } else if (value == "0" || value == "false" || value.empty()) {
    *out = false;
  } else {
    return BadValue(source, value, "0 or 1");
  }
  return Status::Ok();
}

Status ApplyInsecure(const std::string& source, const std::string& value, Options* options) {
  return ApplyBool(source, value, &options->insecure);
}

Status ApplyMarkCycles(const std::string& source, const std::string& value, Options* options) {
  return ApplyBool(source, value, &options->timeline_mark_cycles);
}

Status ApplyFastPath(const std::string& source, const std::string& value, Options* options) {
  return ApplyBool(source, value, &options->fast_path);
}

Status ApplyTimelineMaxMb(const std::string& source, const std::string& value, Options* options) {
  int64_t v = 0;
  KOLO_RETURN_IF_ERROR(ParseInt(source, value, 1, 1 << 20, &v));
  options->timeline_max_mb = v;
  return Status::Ok();
}

Status ApplyStallCheck(const std::string& source, const std::string& value, Options* options) {
  return ParseDouble(source, value, 0.0, 86400.0, &options->stall_check_seconds);
}

Status ApplyStallShutdown(const std::string& source, const std::string& value, Options* options) {
  return ParseDouble(source, value, 0.0, 86400.0, &options->stall_shutdown_seconds);
}

Status ApplyLogLevel(const std::string& source, const std::string& value, Options* options) {
  if (!ParseLogLevel(value).ok()) {
    return BadValue(source, value, "one of trace, debug, info, warning, error, fatal, off");
  }
  options->log_level = value;
  return Status::Ok();
}

Status ApplyTransport(const std::string& source, const std::string& value, Options* options) {
  if (value != "auto" && value != "tcp" && value != "shm") {
    return BadValue(source, value, "auto, tcp or shm");
  }
  options->transport = value;
  return Status::Ok();
}

}  // namespace

const std::vector<ConfigVar>& ConfigTable() {
  static const std::vector<ConfigVar> table = {
      // The identity rows are filled by core/launcher_env.cc, which also reads the launchers'
      // own variables (torchrun, Open MPI, MPICH, SLURM); see the note FormatConfigTable prints.
      {"KOLO_RANK",
       {},
       "from the launcher, else 0",
       "[0, size)",
       "Rank of this process (kolorun sets it).",
       &ApplyInt<0, 1 << 20, &Options::rank>},
      {"KOLO_SIZE",
       {},
       "from the launcher, else 1",
       "[1, 1048576]",
       "Number of ranks in the job.",
       &ApplyInt<1, 1 << 20, &Options::size>},
      {"KOLO_LOCAL_RANK",
       {},
       "from the launcher, else from host names",
       "[0, local size)",
       "Index of this rank among the ranks on its host.",
       &ApplyInt<0, 1 << 20, &Options::local_rank>},
      {"KOLO_LOCAL_SIZE",
       {},
       "from the launcher, else from host names",
       "[1, size]",
       "Number of ranks on this host.",
       &ApplyInt<1, 1 << 20, &Options::local_size>},
      {"KOLO_CONTROLLER",
       {},
       "MASTER_ADDR:MASTER_PORT, else the launcher's rule",
       "host:port",
       "Address of the controller; rank 0 listens on its port.",
       &ApplyController},
      {"KOLO_CONTROLLER_PORT",
       {},
       "MASTER_PORT, else derived from the launcher's job id",
       "[1, 65535]",
       "Controller port when the host comes from MASTER_ADDR or the launcher's rule.",
       &ApplyControllerPort},
      {"KOLO_DATA_ADDR",
       {},
       "interface routing to the controller",
       "IP address",
       "Address peers use to reach this rank's data-plane port.",
       &ApplyString<&Options::data_address>},
      {"KOLO_HOSTNAME",
       {},
       "gethostname()",
       "text",
       "Host name reported to peers; groups ranks into local sets.",
       &ApplyString<&Options::host>},
      {"KOLO_SECRET",
       {},
       "(none)",
       "hex, >= 32 digits",
       "Job secret; kolorun makes a fresh 32-byte one per job. Every connection proves it by "
       "HMAC. Removed from the environment once read; never logged.",
       &ApplySecret},
      {"KOLO_SECRET_FILE",
       {},
       "(none)",
       "file path",
       "File (mode 0600) holding the job secret as hex; instead of KOLO_SECRET.",
       &ApplyString<&Options::secret_file>},
      {"KOLO_JOB_ID",
       {},
       "(empty)",
       "text, <= 256 bytes",
       "Job name bound into every handshake; kolorun sets a fresh one per job. Not secret.",
       &ApplyJobId},
      {"KOLO_INSECURE",
       {},
       "0",
       "0|1",
       "1: let a multi-host job run without a secret (single-host jobs run with a warning).",
       &ApplyInsecure},
      {"KOLO_TLS_CERT",
       {},
       "(off)",
       "PEM file path",
       "TLS certificate rank 0's controller serves (with KOLO_TLS_KEY).",
       &ApplyString<&Options::tls_cert>},
      {"KOLO_TLS_KEY",
       {},
       "(off)",
       "PEM file path",
       "Private key of KOLO_TLS_CERT.",
       &ApplyString<&Options::tls_key>},
      {"KOLO_TLS_CA",
       {},
       "(off)",
       "PEM file path",
       "CA that workers verify the controller's certificate against; set: TLS is used.",
       &ApplyString<&Options::tls_ca>},
      {"KOLO_FUSION_THRESHOLD",
       {"HOROVOD_FUSION_THRESHOLD"},
       "64M",
       "[0, 4G] bytes",
       "Ready tensors are fused into one transfer up to this many bytes; 0 disables fusion.",
       &ApplyFusion},
      {"KOLO_CYCLE_TIME_MS",
       {"HOROVOD_CYCLE_TIME"},
       "1",
       "[0, 1000] ms",
       "Once a tensor is ready, the controller waits at most this long for more to fuse, "
       "while some are announced by some ranks only (else it plans at once).",
       &ApplyCycle},
      {"KOLO_CACHE_CAPACITY",
       {"HOROVOD_CACHE_CAPACITY"},
       "1024",
       "[0, 1000000]",
       "Tensors whose metadata is cached and announced by a short id; 0 disables the cache.",
       &ApplyInt<0, 1000000, &Options::cache_capacity>},
      {"KOLO_TIMEOUT_SECONDS",
       {},
       "30",
       "[0.1, 86400] s",
       "Deadline for data-plane progress, liveness of peers and shutdown.",
       &ApplyTimeout},
      {"KOLO_START_TIMEOUT_SECONDS",
       {"HOROVOD_START_TIMEOUT"},
       "60",
       "[0.1, 86400] s",
       "How long init() waits for every rank to connect.",
       &ApplyStartTimeout},
      {"KOLO_TIMELINE",
       {"HOROVOD_TIMELINE"},
       "(off)",
       "file path",
       "Write a Chrome-trace timeline; rank r writes <path> with .rank<r> before the extension.",
       &ApplyString<&Options::timeline_path>},
      {"KOLO_TIMELINE_MARK_CYCLES",
       {"HOROVOD_TIMELINE_MARK_CYCLES"},
       "0",
       "0|1",
       "Mark each controller planning cycle in the timeline.",
       &ApplyMarkCycles},
      {"KOLO_TIMELINE_MAX_MB",
       {},
       "1024",
       "[1, 1048576] MiB",
       "Stop writing a rank's timeline once its file reaches this size.",
       &ApplyTimelineMaxMb},
      {"KOLO_STALL_CHECK_SECONDS",
       {"HOROVOD_STALL_CHECK_TIME_SECONDS"},
       "60",
       "[0, 86400] s",
       "Warn when a tensor has waited this long for some ranks to submit it; 0 disables.",
       &ApplyStallCheck},
      {"KOLO_STALL_SHUTDOWN_SECONDS",
       {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"},
       "0",
       "[0, 86400] s",
       "Abort the job when a tensor has waited this long for some ranks; 0 never aborts.",
       &ApplyStallShutdown},
      {"KOLO_LOG_LEVEL",
       {"HOROVOD_LOG_LEVEL"},
       "warning",
       "trace|debug|info|warning|error|fatal|off",
       "Log level of kolo's messages on stderr.",
       &ApplyLogLevel},
      {"KOLO_TRANSPORT",
       {},
       "auto",
       "auto|tcp|shm",
       "CPU allreduce and broadcast data path: shm (shared memory; every rank on this host), "
       "tcp (the TCP ring and chain), or auto (shm when all ranks share one host, tcp otherwise). "
       "Same on every rank.",
       &ApplyTransport},
      {"KOLO_FAST_PATH",
       {},
       "1",
       "0|1",
       "1: allreduces seen before (cached) are agreed on among the ranks, without a round trip "
       "to the controller; 0: every op goes through the controller. Same on every rank.",
       &ApplyFastPath},
  };
  return table;
}

std::string FormatConfigTable() {
  std::ostringstream out;
  out << "kolo reads these environment variables (aliases in parentheses; the KOLO_ name "
         "wins):\n\n";
  for (const ConfigVar& var : ConfigTable()) {
    out << "  " << var.name;
    if (!var.aliases.empty()) {
      out << " (";
      for (size_t i = 0; i < var.aliases.size(); ++i) out << (i ? ", " : "") << var.aliases[i];
      out << ")";
    }
    out << "\n      default " << var.default_text << "; range " << var.range << "\n      "
        << var.help << "\n";
  }
  out << "\n  Without KOLO_RANK and KOLO_SIZE, rank and size come from the first launcher that "
         "sets\n"
         "  them: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), Open MPI\n"
         "  (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), MPICH/Hydra (PMI_RANK,\n"
         "  PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS) or SLURM (SLURM_PROCID, SLURM_NTASKS,\n"
         "  SLURM_LOCALID). Without KOLO_CONTROLLER, MASTER_ADDR and MASTER_PORT are used, else\n"
         "  the first node of the SLURM node list, or loopback for a one-host MPI job, with a\n"
         "  port derived from the launcher's job id (README: Running under mpirun/SLURM).\n";
  return out.str();
}

StatusOr<int64_t> ParseByteSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int64_t scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "K" || unit == "KB" || unit == "KIB") scale = int64_t{1} << 10;
  if (unit == "M" || unit == "MB" || unit == "MIB") scale = int64_t{1} << 20;
  if (unit == "G" || unit == "GB" || unit == "GIB") scale = int64_t{1} << 30;
  if (digits == 0 || digits > 15 || scale == 0) {
    return InvalidArgument("'" + text + "' is not a byte size (such as 4096, 64K, 64M, 1G)");
  }
  const int64_t count = std::stoll(text.substr(0, digits));  // < 10^15: cannot overflow
  if (count > std::numeric_limits<int64_t>::max() / scale) {
    return InvalidArgument("'" + text + "' is too large a byte size");
  }
  return count * scale;
}

}  // namespace kolo
