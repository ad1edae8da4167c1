// Options parsing: the environment through the config table, then validation. This is the
// only file that reads the process environment.
#include "kolo/options.h"

#include <unistd.h>

#include <set>

#include "core/config_table.h"

extern char** environ;

namespace kolo {
namespace {

// Known KOLO_ names: a variable with the prefix that is not one of them is almost always a
// typo, and a typo must not silently become a default.
Status CheckUnknownKoloVariables(const std::map<std::string, std::string>& env) {
  std::set<std::string> known;
  for (const ConfigVar& var : ConfigTable()) known.insert(var.name);
  for (const auto& [name, value] : env) {
    if (name.rfind("KOLO_", 0) == 0 && known.count(name) == 0) {
      return InvalidArgument("unknown variable " + name +
                             " (see `kolorun --help-env` for the variables kolo reads)");
    }
  }
  return Status::Ok();
}

Status ApplyTorchrunController(const std::map<std::string, std::string>& env, Options* options) {
  auto addr = env.find("MASTER_ADDR");
  auto port = env.find("MASTER_PORT");
  if (addr == env.end() && port == env.end()) return Status::Ok();
  if (addr == env.end() || port == env.end()) {
    return InvalidArgument("MASTER_ADDR and MASTER_PORT must be set together");
  }
  for (const ConfigVar& var : ConfigTable()) {
    if (std::string(var.name) == "KOLO_CONTROLLER") {
      return var.apply("MASTER_ADDR:MASTER_PORT", addr->second + ":" + port->second, options)
          .WithContext("controller address from torchrun's variables");
    }
  }
  return Status::Ok();
}

// Launchers whose variables kolo does not read yet. A job they start with several processes
// and no KOLO_ or torchrun identity would silently run as that many one-rank jobs.
Status CheckForeignLauncher(const std::map<std::string, std::string>& env) {
  if (env.count("KOLO_SIZE") != 0 || env.count("WORLD_SIZE") != 0) return Status::Ok();
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    auto it = env.find(name);
    if (it != env.end() && it->second != "1" && it->second != "0") {
      return InvalidArgument(std::string(name) + "=" + it->second +
                             " says this process is one of several, but kolo reads its rank and "
                             "size only from KOLO_RANK/KOLO_SIZE (kolorun) or RANK/WORLD_SIZE "
                             "(torchrun); set those");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Options> Options::FromMap(const std::map<std::string, std::string>& env) {
  KOLO_RETURN_IF_ERROR(CheckUnknownKoloVariables(env));
  KOLO_RETURN_IF_ERROR(CheckForeignLauncher(env));
  Options options;
  bool controller_set = false;
  for (const ConfigVar& var : ConfigTable()) {
    std::vector<const char*> names = {var.name};
    names.insert(names.end(), var.aliases.begin(), var.aliases.end());
    for (const char* name : names) {
      auto it = env.find(name);
      if (it == env.end()) continue;
      KOLO_RETURN_IF_ERROR(var.apply(name, it->second, &options));
      if (std::string(var.name) == "KOLO_CONTROLLER") controller_set = true;
      break;  // the first name present wins: KOLO_ before aliases
    }
  }
  if (!controller_set) KOLO_RETURN_IF_ERROR(ApplyTorchrunController(env, &options));
  KOLO_RETURN_IF_ERROR(options.Validate());
  return options;
}

StatusOr<Options> Options::FromEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text(*entry);
    size_t eq = text.find('=');
    if (eq != std::string::npos) env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return FromMap(env);
}

Status Options::Validate() const {
  if (size < 1) return InvalidArgument("size must be at least 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size) {
    return InvalidArgument("rank " + std::to_string(rank) + " is out of range for size " +
                           std::to_string(size) + " (KOLO_RANK must be in [0, KOLO_SIZE))");
  }
  if (local_size != -1 && (local_size < 1 || local_size > size)) {
    return InvalidArgument("local size " + std::to_string(local_size) + " is out of range [1, " +
                           std::to_string(size) + "] (KOLO_LOCAL_SIZE)");
  }
  if (local_rank != -1 && local_size != -1 && local_rank >= local_size) {
    return InvalidArgument("local rank " + std::to_string(local_rank) +
                           " is not below local size " + std::to_string(local_size) +
                           " (KOLO_LOCAL_RANK, KOLO_LOCAL_SIZE)");
  }
  if (size > 1 && controller_address.empty()) {
    return InvalidArgument(
        "a job of " + std::to_string(size) +
        " ranks needs a controller address: set KOLO_CONTROLLER=host:port (kolorun does) or "
        "MASTER_ADDR and MASTER_PORT");
  }
  if (fusion_threshold_bytes < 0) return InvalidArgument("fusion threshold must be >= 0");
  if (cycle_time_ms < 0) return InvalidArgument("cycle time must be >= 0");
  if (cache_capacity < 0) return InvalidArgument("cache capacity must be >= 0");
  if (!(timeout_seconds > 0)) return InvalidArgument("timeout must be > 0 seconds");
  if (!(start_timeout_seconds > 0)) return InvalidArgument("start timeout must be > 0 seconds");
  if (transport != "auto" && transport != "tcp" && transport != "shm") {
    return InvalidArgument("transport '" + transport +
                           "' is not auto, tcp or shm (KOLO_TRANSPORT)");
  }
  if (!(stall_check_seconds >= 0 && stall_check_seconds <= 86400)) {
    return InvalidArgument("stall check time must be in [0, 86400] s (KOLO_STALL_CHECK_SECONDS)");
  }
  if (!(stall_shutdown_seconds >= 0 && stall_shutdown_seconds <= 86400)) {
    return InvalidArgument(
        "stall shutdown time must be in [0, 86400] s (KOLO_STALL_SHUTDOWN_SECONDS)");
  }
  if (timeline_max_mb < 1 || timeline_max_mb > (1 << 20)) {
    return InvalidArgument(
        "timeline size limit must be in [1, 1048576] MiB (KOLO_TIMELINE_MAX_MB)");
  }
  return Status::Ok();
}

}  // namespace kolo
