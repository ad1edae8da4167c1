// Options parsing: the environment through the config table (identity through
// core/config/launcher_env), then validation. This is the only file that reads the process
// environment.
#include "kolo/options.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <vector>

#include "core/config/config_table.h"
#include "core/config/horovod_env.h"
#include "core/config/launcher_env.h"
#include "core/config/near_miss.h"
#include "core/mutex.h"

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
      const std::string likely = LikelyConfigName(name);
      return InvalidArgument("unknown variable " + name +
                             (likely.empty() ? "" : "; did you mean " + likely + "?") +
                             " (see `kolorun --help-env` for the variables kolo reads)");
    }
  }
  return Status::Ok();
}

// Rank, size, local rank/size and the controller, from whichever launcher started us
// (core/config/launcher_env.h), parsed through the table's rows so that errors name the variable.
Status ApplyLauncherIdentity(const std::map<std::string, std::string>& env, Options* options) {
  StatusOr<LauncherIdentity> identity = DetectLauncher(env, CurrentProcessFacts());
  if (!identity.ok()) return identity.status();
  for (const IdentitySetting& setting : identity->settings) {
    Status applied = FindConfigVar(setting.kolo_name).apply(setting.source, setting.value, options);
    if (!applied.ok() && !identity->controller_source.empty() &&
        setting.kolo_name == "KOLO_CONTROLLER") {
      return applied.WithContext("controller address (" + identity->controller_source + ")");
    }
    KOLO_RETURN_IF_ERROR(applied);
  }
  options->identity_source = identity->launcher;
  options->controller_source = identity->controller_source;
  return Status::Ok();
}

}  // namespace

Options::Options() {
  for (const ConfigVar& var : ConfigTable()) var.set_default(this);
}

StatusOr<Options> Options::FromMap(const std::map<std::string, std::string>& env) {
  KOLO_RETURN_IF_ERROR(CheckUnknownKoloVariables(env));
  Options options;
  for (const ConfigVar& var : ConfigTable()) {
    if (IsIdentityVariable(var.name)) continue;  // ApplyLauncherIdentity's
    std::vector<const char*> names = {var.name};
    names.insert(names.end(), var.aliases.begin(), var.aliases.end());
    for (const char* name : names) {
      auto it = env.find(name);
      if (it == env.end()) continue;
      KOLO_RETURN_IF_ERROR(var.apply(name, it->second, &options));
      break;  // the first name present wins: KOLO_ before aliases
    }
  }
  KOLO_RETURN_IF_ERROR(ApplyLauncherIdentity(env, &options));
  options.environment_warnings = NearMissWarnings(env);
  KOLO_RETURN_IF_ERROR(ApplyHorovodVariables(env, &options));  // adds its warnings
  KOLO_RETURN_IF_ERROR(options.Validate());
  return options;
}

StatusOr<Options> Options::FromEnvironment() {
  // KOLO_SECRET leaves the environment at the first read, so that child processes of the
  // training program (data loaders, shells) do not inherit it; later reads (init() after
  // shutdown()) get the remembered value. The lock also guards the warnings given already.
  static Mutex secret_mu;
  static std::optional<std::string> remembered_secret KOLO_GUARDED_BY(secret_mu);
  MutexLock lock(&secret_mu);
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text(*entry);
    size_t eq = text.find('=');
    if (eq != std::string::npos) env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  auto secret = env.find("KOLO_SECRET");
  if (secret != env.end()) {
    remembered_secret = secret->second;
    unsetenv("KOLO_SECRET");
  } else if (remembered_secret.has_value()) {
    env.emplace("KOLO_SECRET", *remembered_secret);
  }
  StatusOr<Options> options = FromMap(env);
  if (options.ok()) {
    // Each warning once per process: init() after shutdown(), an elastic job's every reset and
    // torch.distributed's init read the environment again, and say nothing new.
    static std::set<std::string> warned KOLO_GUARDED_BY(secret_mu);
    std::vector<std::string> fresh;
    for (std::string& warning : options->environment_warnings) {
      if (warned.insert(warning).second) fresh.push_back(std::move(warning));
    }
    options->environment_warnings = std::move(fresh);
  }
  return options;
}

Status Options::Validate() const {
  KOLO_RETURN_IF_ERROR(CheckConfigRanges(*this));
  // What one row cannot say: relations between variables.
  if (rank >= size) {
    return InvalidArgument("rank " + std::to_string(rank) + " is out of range for size " +
                           std::to_string(size) + " (KOLO_RANK must be in [0, KOLO_SIZE))");
  }
  if (local_size > size) {
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
  if (!secret.empty() && !secret_file.empty()) {
    return InvalidArgument("KOLO_SECRET and KOLO_SECRET_FILE are both set; set one");
  }
  return Status::Ok();
}

}  // namespace kolo
