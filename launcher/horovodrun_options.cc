// horovodrun's settings turned into kolo's; see horovodrun_options.h.
#include "launcher/horovodrun_options.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/config/config_table.h"
#include "launcher/option_table.h"

namespace kolo::launcher {
namespace {

enum class Kind {
  kCount,       // an integer >= 0 (horovodrun's type=int, validated >= 0)
  kNumber,      // a number >= 0 (type=float)
  kFraction,    // a number in [0, 1]
  kBool,        // "1" or "0"
  kText,        // any text
  kLogLevel,    // TRACE, DEBUG, INFO, WARNING, ERROR or FATAL, any case
  kController,  // gloo, mpi or jsrun, any case
};

struct Knob {
  const char* dest;
  Kind kind;
  // The variable the value becomes (fusion_threshold_mb, hierarchical_allreduce, no_stall_check
  // and tcp_flag convert it first); nullptr: the option has no effect, its help says why.
  const char* variable;
};

// In the order the variables are set: no_stall_check after the warning time, so that it wins.
const std::vector<Knob>& Knobs() {
  static const std::vector<Knob> knobs = {
      {"disable_cache", Kind::kBool, nullptr},
      {"nics", Kind::kText, nullptr},
      {"fusion_threshold_mb", Kind::kCount, "KOLO_FUSION_THRESHOLD"},
      {"cycle_time_ms", Kind::kNumber, "KOLO_CYCLE_TIME_MS"},
      {"cache_capacity", Kind::kCount, "KOLO_CACHE_CAPACITY"},
      {"hierarchical_allreduce", Kind::kBool, "KOLO_HIERARCHICAL"},
      {"hierarchical_allgather", Kind::kBool, nullptr},
      {"torus_allreduce", Kind::kBool, nullptr},
      {"autotune", Kind::kBool, "KOLO_AUTOTUNE"},
      {"autotune_log_file", Kind::kText, "KOLO_AUTOTUNE_LOG"},
      {"autotune_warmup_samples", Kind::kCount, "KOLO_AUTOTUNE_WARMUP_SAMPLES"},
      {"autotune_steps_per_sample", Kind::kCount, "KOLO_AUTOTUNE_STEPS_PER_SAMPLE"},
      {"autotune_bayes_opt_max_samples", Kind::kCount, nullptr},
      {"autotune_gaussian_process_noise", Kind::kFraction, nullptr},
      {"timeline_filename", Kind::kText, "KOLO_TIMELINE"},
      {"timeline_mark_cycles", Kind::kBool, "KOLO_TIMELINE_MARK_CYCLES"},
      {"stall_check_warning_time_seconds", Kind::kCount, "KOLO_STALL_CHECK_SECONDS"},
      {"stall_check_shutdown_time_seconds", Kind::kCount, "KOLO_STALL_SHUTDOWN_SECONDS"},
      {"no_stall_check", Kind::kBool, "KOLO_STALL_CHECK_SECONDS"},
      {"mpi_threads_disable", Kind::kBool, nullptr},
      {"mpi_args", Kind::kText, nullptr},
      {"tcp_flag", Kind::kBool, "KOLO_TRANSPORT"},
      {"binding_args", Kind::kText, nullptr},
      {"num_nccl_streams", Kind::kCount, nullptr},
      {"thread_affinity", Kind::kCount, nullptr},
      {"gloo_timeout_seconds", Kind::kCount, "KOLO_TIMEOUT_SECONDS"},
      {"log_level", Kind::kLogLevel, "KOLO_LOG_LEVEL"},
      {"log_with_timestamp", Kind::kBool, nullptr},
      {"controller", Kind::kController, nullptr},
  };
  return knobs;
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The value checked as horovodrun checks it, in a canonical spelling (lower case for names).
StatusOr<std::string> CheckKind(Kind kind, const Setting& setting) {
  const std::string& v = setting.value;
  const std::string got = ", got '" + v + "'";
  errno = 0;
  char* end = nullptr;
  switch (kind) {
    case Kind::kCount: {
      const bool digits =
          !v.empty() && v.size() <= 12 && v.find_first_not_of("0123456789") == std::string::npos;
      if (!digits) return InvalidArgument(setting.source + " must be an integer >= 0" + got);
      return v;
    }
    case Kind::kNumber:
    case Kind::kFraction: {
      const double x = v.empty() ? -1 : std::strtod(v.c_str(), &end);
      const double high = kind == Kind::kFraction ? 1 : HUGE_VAL;
      if (v.empty() || errno != 0 || *end != '\0' || !std::isfinite(x) || x < 0 || x > high) {
        return InvalidArgument(setting.source + " must be a number " +
                               (kind == Kind::kFraction ? "in [0, 1]" : ">= 0") + got);
      }
      return v;
    }
    case Kind::kBool:
      if (v != "1" && v != "0")
        return InvalidArgument(setting.source + " must be true or false" + got);
      return v;
    case Kind::kText:
      return v;
    case Kind::kLogLevel:
      for (const char* level : {"trace", "debug", "info", "warning", "error", "fatal"}) {
        if (Lower(v) == level) return Lower(v);
      }
      return InvalidArgument(setting.source +
                             " must be one of TRACE, DEBUG, INFO, WARNING, ERROR, FATAL" + got);
    case Kind::kController:
      for (const char* name : {"gloo", "mpi", "jsrun"}) {
        if (Lower(v) == name) return Lower(v);
      }
      return InvalidArgument(setting.source + ": no such controller: '" + v +
                             "' (horovodrun's are gloo and mpi)");
  }
  return v;
}

// The reason an option has no effect: the help of the option that stores `value` under `dest`
// (or of the first with that dest), after its "no effect: ".
std::string NoEffectReason(const std::string& dest, const std::string& value) {
  const OptionSpec* chosen = nullptr;
  for (const OptionSpec& spec : OptionTable()) {
    if (dest != spec.dest) continue;
    if (chosen == nullptr || (spec.values == 0 && value == spec.flag_value)) chosen = &spec;
    if (spec.values == 0 && value == spec.flag_value) break;
  }
  std::string help = chosen != nullptr ? chosen->help : "";
  const std::string prefix = "no effect: ";
  return help.compare(0, prefix.size(), prefix) == 0 ? help.substr(prefix.size()) : help;
}

// The variable's value: `value` converted where kolo's unit or vocabulary differs.
std::string KoloValue(const std::string& dest, const std::string& value) {
  if (dest == "fusion_threshold_mb") return std::to_string(std::stoll(value) * (int64_t{1} << 20));
  if (dest == "hierarchical_allreduce") return value == "1" ? "on" : "off";
  if (dest == "no_stall_check") return "0";
  if (dest == "tcp_flag") return "tcp";
  return value;
}

void Put(std::vector<EnvVar>* env, const std::string& name, const std::string& value) {
  for (EnvVar& var : *env) {
    if (var.first == name) {
      var.second = value;
      return;
    }
  }
  env->emplace_back(name, value);
}

// The controller options: nothing to do, but --jsrun asks for a launcher kolo does not have.
Status ResolveController(const Setting& setting, const std::string& name, bool jsrun_installed,
                         RankSettings* out) {
  if (name != "jsrun") {
    out->notes.push_back(setting.source + " has no effect: " + NoEffectReason("controller", name));
    return Status::Ok();
  }
  if (!jsrun_installed) {
    return InvalidArgument(setting.source +
                           ": jsrun is not installed here (not on PATH); kolorun starts the "
                           "ranks itself: on this host, over ssh (-H, --hostfile) or through "
                           "--launch-cmd");
  }
  out->notes.push_back(setting.source +
                       " has no effect: kolorun starts the ranks itself, not through jsrun, "
                       "and does not read LSF's allocation (give -H or --hostfile)");
  return Status::Ok();
}

// One setting into `out`.
Status Resolve(const Knob& knob, const Setting& setting, bool jsrun_installed, RankSettings* out) {
  KOLO_ASSIGN_OR_RETURN(std::string value, CheckKind(knob.kind, setting));
  if (knob.kind == Kind::kController) {
    return ResolveController(setting, value, jsrun_installed, out);
  }
  if (knob.variable == nullptr) {
    out->notes.push_back(setting.source + " has no effect: " + NoEffectReason(knob.dest, value));
    return Status::Ok();
  }
  const std::string dest = knob.dest;
  if (dest == "no_stall_check" && value == "0") {
    // The stall check stays on, whatever HOROVOD_STALL_CHECK_DISABLE kolorun's environment has.
    Put(&out->env, "HOROVOD_STALL_CHECK_DISABLE", "0");
    return Status::Ok();
  }
  if (dest == "tcp_flag" && value == "0") return Status::Ok();
  if (knob.kind == Kind::kText && value.empty()) return Status::Ok();  // as horovodrun: unset
  const std::string kolo_value = KoloValue(dest, value);
  const ConfigVar& row = FindConfigVar(knob.variable);
  Options scratch;
  const Status in_range = row.apply(row.name, kolo_value, &scratch);
  if (!in_range.ok()) {
    return InvalidArgument(setting.source + " " + setting.value + ": " + in_range.message());
  }
  Put(&out->env, knob.variable, kolo_value);
  if (dest == "tcp_flag") Put(&out->env, "NCCL_IB_DISABLE", "1");  // as horovodrun --tcp sets
  return Status::Ok();
}

}  // namespace

bool IsHorovodrunSetting(const std::string& dest) {
  for (const Knob& knob : Knobs()) {
    if (dest == knob.dest) return true;
  }
  return false;
}

void MergeConfigSettings(const HorovodrunSettings& from_file, HorovodrunSettings* command_line) {
  for (const auto& [dest, setting] : from_file) command_line->emplace(dest, setting);
}

StatusOr<RankSettings> ResolveSettings(const HorovodrunSettings& settings, bool jsrun_installed) {
  RankSettings out;
  for (const Knob& knob : Knobs()) {
    auto it = settings.find(knob.dest);
    if (it != settings.end())
      KOLO_RETURN_IF_ERROR(Resolve(knob, it->second, jsrun_installed, &out));
  }
  return out;
}

void AddToRankEnvironment(const RankSettings& settings, std::vector<std::string>* base_env,
                          std::vector<std::string>* forward_env) {
  *base_env = MergeEnvironment(*base_env, settings.env);
  for (const auto& [name, value] : settings.env) {
    if (name.rfind("KOLO_", 0) != 0 && name.rfind("HOROVOD_", 0) != 0) {
      forward_env->push_back(name + "=" + value);
    }
  }
}

bool JsrunInstalled() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    if (access((dir + "/jsrun").c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace kolo::launcher
