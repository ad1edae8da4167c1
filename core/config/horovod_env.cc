// Horovod's variables (core/config/horovod_env.h): one row each, saying what kolo does with it.
#include "core/config/horovod_env.h"

#include <strings.h>

#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "core/config/config_values.h"

namespace kolo {
namespace {

constexpr int64_t kMaxRanks = int64_t{1} << 20;

Status NotSupported(const HorovodVariable& self, const std::string& value, const std::string& why) {
  return InvalidArgument(std::string(self.name) + "='" + value + "' is not supported: " + why);
}

bool IsOneOf(const std::string& value, const std::vector<const char*>& values) {
  for (const char* v : values) {
    if (strcasecmp(value.c_str(), v) == 0) return true;
  }
  return false;
}

// HOROVOD_RANK and the like: horovodrun's identity must be the one kolo read from its launcher.
Status CheckIdentity(const HorovodVariable& self, const std::string& value, Options* options) {
  KOLO_ASSIGN_OR_RETURN(int64_t given, ParseIntegerValue(self.name, value, 0, kMaxRanks));
  const int resolved = options->*self.identity;
  if (resolved < 0 || given == resolved) return Status::Ok();
  const std::string source = options->identity_source.empty()
                                 ? "no launcher variables: a one-rank job"
                                 : "from " + options->identity_source;
  return InvalidArgument(std::string(self.name) + "=" + value + " disagrees with kolo's " +
                         self.detail + " " + std::to_string(resolved) + " (" + source +
                         "); kolo reads the job from kolorun, torchrun, mpirun or srun, not "
                         "from Horovod's launcher");
}

Status DisableStallCheck(const HorovodVariable& self, const std::string& value, Options* options) {
  KOLO_ASSIGN_OR_RETURN(bool disable, ParseBoolValue(self.name, value));
  if (disable) options->stall_check_seconds = 0;  // disabling wins, as in Horovod
  return Status::Ok();
}

Status CheckElastic(const HorovodVariable& self, const std::string& value, Options* options) {
  KOLO_ASSIGN_OR_RETURN(bool elastic, ParseBoolValue(self.name, value));
  if (!elastic || !options->elastic_rendezvous.empty()) return Status::Ok();
  return NotSupported(self, value,
                      "kolo's elastic jobs are started by kolorun "
                      "--min-np/--max-np/--host-discovery-script (docs/ELASTIC.md), which sets "
                      "KOLO_ELASTIC_RENDEZVOUS; this process has none");
}

// kolorun exports HOROVOD_CROSS_RANK and _SIZE to every rank, as horovodrun does.
bool KolorunJob(const std::string&, const Options& options) {
  return options.identity_source == "kolo" || !options.elastic_rendezvous.empty();
}

// HOROVOD_HIERARCHICAL_ALLGATHER asks for what KOLO_HIERARCHICAL decided anyway.
bool AgreesWithHierarchical(const std::string& value, const Options& options) {
  return (value == "1" && options.hierarchical == Hierarchical::kOn) ||
         (value == "0" && options.hierarchical == Hierarchical::kOff);
}

HorovodVariable Identity(const char* name, const char* what, int Options::*field) {
  HorovodVariable v{name, HorovodHandling::kMapped, what, {}, CheckIdentity};
  v.identity = field;
  return v;
}
HorovodVariable Mapped(const char* name, const char* detail,
                       Status (*map)(const HorovodVariable&, const std::string&, Options*)) {
  return {name, HorovodHandling::kMapped, detail, {}, map};
}
HorovodVariable Accepted(const char* name, std::vector<const char*> values, const char* detail) {
  return {name, HorovodHandling::kMapped, detail, std::move(values)};
}
HorovodVariable Warned(const char* name, const char* why, std::vector<const char*> quiet = {}) {
  return {name, HorovodHandling::kWarned, why, std::move(quiet)};
}
// Warned, and its value never quoted.
HorovodVariable WarnedSecret(const char* name, const char* why) {
  HorovodVariable v{name, HorovodHandling::kWarned, why};
  v.secret = true;
  return v;
}
HorovodVariable WarnedUnless(const char* name, const char* why,
                             bool (*quiet_when)(const std::string&, const Options&)) {
  HorovodVariable v{name, HorovodHandling::kWarned, why};
  v.quiet_when = quiet_when;
  return v;
}
HorovodVariable Refused(const char* name, const char* what_to_do) {
  return {name, HorovodHandling::kRefused, what_to_do};
}

constexpr char kBuildOption[] =
    "a build option of Horovod's (read when it is installed), without effect at run time in "
    "Horovod too; kolo's GPU data path is KOLO_GPU_OPERATIONS";
constexpr char kBayesian[] =
    "kolo's autotuner climbs a doubling grid instead of Horovod's Bayesian optimisation "
    "(KOLO_AUTOTUNE, KOLO_AUTOTUNE_SAMPLES)";
constexpr char kCrossRank[] =
    "kolo computes cross ranks and sizes from the host names the ranks report (kolorun exports "
    "them for scripts, as horovodrun does)";
constexpr char kGlooRendezvous[] =
    "this process was started by horovodrun --gloo, whose rendezvous kolo cannot join; start "
    "the job with kolorun (or torchrun, mpirun, srun)";

std::vector<HorovodVariable> BuildHorovodVariables() {
  return {
      Identity("HOROVOD_RANK", "rank", &Options::rank),
      Identity("HOROVOD_SIZE", "size", &Options::size),
      Identity("HOROVOD_LOCAL_RANK", "local rank", &Options::local_rank),
      Identity("HOROVOD_LOCAL_SIZE", "local size", &Options::local_size),
      Mapped("HOROVOD_STALL_CHECK_DISABLE", "1: KOLO_STALL_CHECK_SECONDS=0", DisableStallCheck),
      Mapped("HOROVOD_ELASTIC", "1: only in kolorun's elastic jobs", CheckElastic),
      Accepted("HOROVOD_CONTROLLER", {"gloo"}, "kolo's controller is gRPC; unset it or set gloo"),
      Accepted("HOROVOD_CPU_OPERATIONS", {"gloo"},
               "kolo's CPU collectives run on its own TCP ring or shared memory "
               "(KOLO_TRANSPORT); unset it or set gloo"),
      Refused("HOROVOD_GLOO_RENDEZVOUS_ADDR", kGlooRendezvous),
      Refused("HOROVOD_GLOO_RENDEZVOUS_PORT", kGlooRendezvous),
      Warned("HOROVOD_ADASUM_MPI_CHUNK_SIZE",
             "kolo's Adasum (kolo.torch) combines the tensors of an allgather on each rank, in "
             "no MPI chunks"),
      Warned("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", kBayesian),
      Warned("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", kBayesian),
      Warned("HOROVOD_BATCH_D2D_MEMCOPIES",
             "kolo fills its GPU fusion buffer with one copy per tensor (no batched copy kernel)",
             {"0"}),
      Warned("HOROVOD_CCL_CACHE", "kolo does not use oneCCL", {"0"}),
      WarnedUnless("HOROVOD_CROSS_RANK", kCrossRank, KolorunJob),
      WarnedUnless("HOROVOD_CROSS_SIZE", kCrossRank, KolorunJob),
      Warned("HOROVOD_DISABLE_GROUP_FUSION",
             "kolo fuses a group's tensors together with other ready tensors", {"0"}),
      Warned("HOROVOD_DISABLE_NVTX_RANGES", "kolo emits no NVTX ranges", {"1"}),
      Warned("HOROVOD_DYNAMIC_PROCESS_SETS", "kolo can always add and remove process sets", {"1"}),
      Warned("HOROVOD_ENABLE_ASYNC_COMPLETION",
             "kolo completes a GPU op once its GPU work is done (its completion thread waits "
             "on the op's event), without handing the framework's stream an event to wait on",
             {"0"}),
      Warned("HOROVOD_ENABLE_XLA_OPS",
             "kolo.tensorflow has no XLA implementations of its ops (Horovod's xla_mpi_ops)",
             {"0"}),
      Warned("HOROVOD_GLOO_IFACE",
             "kolo does not use Gloo; its data plane listens on the address that routes to the "
             "controller, or on KOLO_DATA_ADDR"),
      Warned("HOROVOD_GPU_ALLGATHER", kBuildOption),
      Warned("HOROVOD_GPU_ALLREDUCE", kBuildOption),
      Warned("HOROVOD_GPU_ALLTOALL", kBuildOption),
      Warned("HOROVOD_GPU_BROADCAST", kBuildOption),
      Warned("HOROVOD_GPU_REDUCESCATTER", kBuildOption),
      WarnedUnless("HOROVOD_HIERARCHICAL_ALLGATHER",
                   "KOLO_HIERARCHICAL (HOROVOD_HIERARCHICAL_ALLREDUCE) decides for allreduces, "
                   "allgathers and reducescatters together",
                   AgreesWithHierarchical),
      Warned("HOROVOD_LOG_HIDE_TIME", "kolo's log lines always carry the time", {"0"}),
      Warned("HOROVOD_MPI_THREADS_DISABLE", "kolo does not use MPI", {"1"}),
      Warned("HOROVOD_NUM_NCCL_STREAMS", "kolo runs its NCCL collectives on one stream per GPU",
             {"1"}),
      WarnedSecret("_HOROVOD_SECRET_KEY",
                   "it is horovodrun's key for its own services; kolo's job secret is KOLO_SECRET "
                   "(kolorun makes one)"),
      Warned("HOROVOD_THREAD_AFFINITY",
             "kolo does not pin its background thread; pin the whole rank instead (taskset, "
             "numactl, or the launcher's binding)"),
      Warned("HOROVOD_TORUS_ALLREDUCE",
             "kolo has no torus allreduce; its two-level allreduce is KOLO_HIERARCHICAL (CPU "
             "tensors)",
             {"0"}),
  };
}

Status Apply(const HorovodVariable& self, const std::string& value, Options* options) {
  switch (self.handling) {
    case HorovodHandling::kAlias:
      break;  // the config table's row read it
    case HorovodHandling::kMapped:
      if (self.map != nullptr) return self.map(self, value, options);
      if (!IsOneOf(value, self.values)) return NotSupported(self, value, self.detail);
      break;
    case HorovodHandling::kRefused:
      return NotSupported(self, value, self.detail);
    case HorovodHandling::kWarned:
      if (IsOneOf(value, self.values)) break;
      if (self.quiet_when != nullptr && self.quiet_when(value, *options)) break;
      options->environment_warnings.push_back(
          std::string(self.name) + (self.secret ? " (value not shown)" : "='" + value + "'") +
          " is ignored: " + self.detail);
      break;
  }
  return Status::Ok();
}

std::string Names(HorovodHandling handling, bool with_detail) {
  std::string text;
  for (const HorovodVariable& v : HorovodVariables()) {
    if (v.handling != handling) continue;
    text += (text.empty() ? "`" : ", `") + std::string(v.name) + "`";
    std::string note;
    if (handling == HorovodHandling::kWarned) {
      for (const char* quiet : v.values) note += (note.empty() ? "" : ", ") + std::string(quiet);
      if (!note.empty()) note = "quiet: " + note;
      if (v.quiet_when == KolorunJob) note = "quiet under kolorun";
      if (v.quiet_when == AgreesWithHierarchical) note = "quiet when KOLO_HIERARCHICAL agrees";
    } else if (with_detail) {
      note = v.identity != nullptr ? std::string("must equal kolo's ") + v.detail : v.detail;
      if (v.map == nullptr && !v.values.empty()) note = std::string("accepted: ") + v.values[0];
    }
    if (!note.empty()) text += " (" + note + ")";
  }
  return text;
}

}  // namespace

const std::vector<HorovodVariable>& HorovodVariables() {
  static const std::vector<HorovodVariable> variables = BuildHorovodVariables();
  return variables;
}

std::vector<std::string> HorovodAliasNames() {
  std::vector<std::string> names;
  for (const ConfigVar& var : ConfigTable()) {
    for (const char* alias : var.aliases) {
      if (std::string(alias).rfind("HOROVOD_", 0) == 0) names.push_back(alias);
    }
  }
  return names;
}

Status ApplyHorovodVariables(const std::map<std::string, std::string>& env, Options* options) {
  for (const HorovodVariable& variable : HorovodVariables()) {
    auto it = env.find(variable.name);
    if (it == env.end() || it->second.empty()) continue;
    KOLO_RETURN_IF_ERROR(Apply(variable, it->second, options));
  }
  return Status::Ok();
}

bool IsHandledHorovodVariable(const std::string& name) {
  for (const HorovodVariable& variable : HorovodVariables()) {
    if (name == variable.name) return true;
  }
  return false;
}

std::vector<std::string> HorovodVariablesMarkdownRows() {
  std::string aliases;
  for (const std::string& name : HorovodAliasNames()) {
    aliases += (aliases.empty() ? "`" : ", `") + name + "`";
  }
  return {
      "| Horovod's variables | what kolo does |",
      "|---|---|",
      "| aliases: " + aliases +
          " | read as the `KOLO_` variable they follow in the table above: the same values and "
          "meaning; the `KOLO_` name wins |",
      "| mapped: " + Names(HorovodHandling::kMapped, true) +
          " | translated onto kolo's options or checked against them; a value kolo cannot "
          "honour fails `init()` saying what kolo supports |",
      "| warned: " + Names(HorovodHandling::kWarned, false) +
          " | ignored with one warning at `init()` naming it and why; quiet when its value asks "
          "for what kolo does anyway |",
      "| refused: " + Names(HorovodHandling::kRefused, false) +
          " | a `horovodrun --gloo` job: `init()` fails, saying to start it with kolorun (or "
          "torchrun, mpirun, srun) |",
  };
}

}  // namespace kolo
