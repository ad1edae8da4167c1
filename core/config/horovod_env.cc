// Horovod's variables beyond the config table's aliases (core/config/horovod_env.h): one row
// each, saying what kolo does with it.
#include "core/config/horovod_env.h"

#include <string>
#include <vector>

namespace kolo {
namespace {

enum class Handling {
  kNoEffect,           // about a part of Horovod kolo does not have; accepted with any value
  kOnly,               // accepted with one of `accepted`; any other value asks for what kolo lacks
  kRefused,            // accepted with no value: it asks for what kolo does not do
  kIdentity,           // must agree with the rank, size, local rank or local size kolo resolved
  kStallCheckDisable,  // 1: as KOLO_STALL_CHECK_SECONDS=0
  kElastic,            // 1 only in an elastic job (KOLO_ELASTIC_RENDEZVOUS set by kolorun)
};

struct HorovodVariable {
  const char* name;
  Handling handling;
  // kOnly and kStallCheckDisable: the values accepted (unused entries null).
  const char* accepted[2];
  // Why it has no effect, or why kolo refuses it and what to use instead; kIdentity: what
  // `identity` is called.
  const char* reason;
  int Options::*identity = nullptr;  // kIdentity: the resolved value it must equal
};

HorovodVariable Identity(const char* name, const char* what, int Options::*identity) {
  return {name, Handling::kIdentity, {}, what, identity};
}
HorovodVariable NoEffect(const char* name, const char* reason) {
  return {name, Handling::kNoEffect, {}, reason};
}
HorovodVariable OnlyWith(const char* name, const char* accepted, const char* reason) {
  return {name, Handling::kOnly, {accepted, nullptr}, reason};
}
HorovodVariable Refused(const char* name, const char* reason) {
  return {name, Handling::kRefused, {}, reason};
}
HorovodVariable StallCheckDisable(const char* name, const char* reason) {
  return {name, Handling::kStallCheckDisable, {"0", "1"}, reason};
}

// The variables Horovod 0.28's launchers (horovodrun --gloo / --mpi) and test suites set, and
// the switches of Horovod features a user's script may set.
const std::vector<HorovodVariable>& HorovodVariables() {
  static const std::vector<HorovodVariable> variables = {
      Identity("HOROVOD_RANK", "rank", &Options::rank),
      Identity("HOROVOD_SIZE", "size", &Options::size),
      Identity("HOROVOD_LOCAL_RANK", "local rank", &Options::local_rank),
      Identity("HOROVOD_LOCAL_SIZE", "local size", &Options::local_size),
      NoEffect("HOROVOD_CROSS_RANK",
               "kolo computes cross ranks from the host names the ranks report"),
      NoEffect("HOROVOD_CROSS_SIZE",
               "kolo computes the cross size from the host names the ranks report"),
      NoEffect("HOROVOD_HOSTNAME",
               "kolo reads this host's name from KOLO_HOSTNAME or gethostname()"),
      NoEffect("HOROVOD_DYNAMIC_PROCESS_SETS", "kolo can always add and remove process sets"),
      NoEffect("HOROVOD_MIXED_INSTALL", "only Horovod's tests read it"),
      NoEffect("HOROVOD_MPI_THREADS_DISABLE", "kolo does not use MPI"),
      NoEffect("HOROVOD_GLOO_IFACE",
               "kolo does not use Gloo; its data plane binds the interface that routes to the "
               "controller (KOLO_DATA_ADDR)"),
      NoEffect("HOROVOD_GLOO_TIMEOUT_SECONDS",
               "kolo does not use Gloo; its deadlines are KOLO_START_TIMEOUT_SECONDS and "
               "KOLO_TIMEOUT_SECONDS"),
      NoEffect("HOROVOD_GPU_ALLREDUCE",
               "a Horovod build option; kolo's GPU path is KOLO_GPU_OPERATIONS"),
      NoEffect("HOROVOD_GPU_ALLGATHER",
               "a Horovod build option; kolo's GPU path is KOLO_GPU_OPERATIONS"),
      NoEffect("HOROVOD_GPU_BROADCAST",
               "a Horovod build option; kolo's GPU path is KOLO_GPU_OPERATIONS"),
      NoEffect("HOROVOD_GPU_ALLTOALL",
               "a Horovod build option; kolo's GPU path is KOLO_GPU_OPERATIONS"),
      NoEffect("HOROVOD_GPU_REDUCESCATTER",
               "a Horovod build option; kolo's GPU path is KOLO_GPU_OPERATIONS"),
      NoEffect("HOROVOD_BATCH_D2D_MEMCOPIES",
               "tunes Horovod's GPU fusion-buffer copies, which kolo does not have"),
      NoEffect("HOROVOD_LOG_HIDE_TIME", "kolo's log lines have a fixed format"),
      NoEffect("HOROVOD_HIERARCHICAL_ALLGATHER",
               "KOLO_HIERARCHICAL (HOROVOD_HIERARCHICAL_ALLREDUCE) decides for allreduces, "
               "allgathers and broadcasts together"),
      NoEffect("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
               "kolo's autotuner climbs a doubling grid instead of Horovod's Bayesian "
               "optimisation (KOLO_AUTOTUNE)"),
      NoEffect("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
               "kolo's autotuner climbs a doubling grid instead of Horovod's Bayesian "
               "optimisation (KOLO_AUTOTUNE)"),
      {"HOROVOD_ELASTIC",
       Handling::kElastic,
       {"0", "1"},
       "kolo's elastic jobs are started by kolorun --min-np/--max-np/--host-discovery-script "
       "(docs/ELASTIC.md), which sets KOLO_ELASTIC_RENDEZVOUS; this process has none"},
      OnlyWith("HOROVOD_DISABLE_GROUP_FUSION", "0",
               "kolo always fuses a group's tensors together with other ready tensors; unset it or "
               "set 0"),
      OnlyWith("HOROVOD_NUM_NCCL_STREAMS", "1",
               "kolo runs its NCCL collectives on one stream per GPU; unset it or set 1"),
      Refused("HOROVOD_THREAD_AFFINITY",
              "kolo does not pin its background thread; pin the whole rank instead (taskset, "
              "numactl, or the launcher's binding)"),
      Refused(
          "HOROVOD_CONTROLLER",
          "kolo always uses its own controller on rank 0 (no MPI or Gloo controller); unset it"),
      Refused("HOROVOD_CPU_OPERATIONS",
              "kolo's CPU data path is chosen by KOLO_TRANSPORT (shm, tcp or auto); unset it"),
      Refused("HOROVOD_GLOO_RENDEZVOUS_ADDR",
              "this process was started by horovodrun --gloo, whose rendezvous kolo cannot join; "
              "start the job with kolorun (or torchrun, mpirun, srun)"),
      Refused("HOROVOD_GLOO_RENDEZVOUS_PORT",
              "this process was started by horovodrun --gloo, whose rendezvous kolo cannot join; "
              "start the job with kolorun (or torchrun, mpirun, srun)"),
      StallCheckDisable("HOROVOD_STALL_CHECK_DISABLE",
                        "1 disables the stall check (KOLO_STALL_CHECK_SECONDS=0), 0 leaves it on"),
  };
  return variables;
}

Status Refuse(const std::string& name, const std::string& value, const std::string& why) {
  return InvalidArgument(name + "=" + value + " is not supported: " + why);
}

bool IsAccepted(const HorovodVariable& variable, const std::string& value) {
  for (const char* accepted : variable.accepted) {
    if (accepted != nullptr && value == accepted) return true;
  }
  return false;
}

Status CheckIdentity(const HorovodVariable& variable, const std::string& value,
                     const Options& options) {
  const int resolved = options.*variable.identity;
  if (resolved < 0 || value == std::to_string(resolved)) return Status::Ok();
  const std::string source = options.identity_source.empty()
                                 ? "no launcher variables: a one-rank job"
                                 : "from " + options.identity_source;
  return InvalidArgument(std::string(variable.name) + "=" + value + " disagrees with kolo's " +
                         variable.reason + " " + std::to_string(resolved) + " (" + source +
                         "); kolo reads the job from kolorun, torchrun, mpirun or srun, not "
                         "from Horovod's launcher");
}

}  // namespace

Status ApplyHorovodVariables(const std::map<std::string, std::string>& env, Options* options) {
  for (const HorovodVariable& variable : HorovodVariables()) {
    auto it = env.find(variable.name);
    if (it == env.end()) continue;
    const std::string& value = it->second;
    switch (variable.handling) {
      case Handling::kNoEffect:
        break;
      case Handling::kOnly:
        if (!value.empty() && !IsAccepted(variable, value)) {
          return Refuse(variable.name, value, variable.reason);
        }
        break;
      case Handling::kRefused:
        if (!value.empty()) return Refuse(variable.name, value, variable.reason);
        break;
      case Handling::kElastic:
        if (!value.empty() && !IsAccepted(variable, value)) {
          return Refuse(variable.name, value, "set 0 or 1");
        }
        if (value == "1" && options->elastic_rendezvous.empty()) {
          return Refuse(variable.name, value, variable.reason);
        }
        break;
      case Handling::kIdentity:
        KOLO_RETURN_IF_ERROR(CheckIdentity(variable, value, *options));
        break;
      case Handling::kStallCheckDisable:
        if (!value.empty() && !IsAccepted(variable, value)) {
          return InvalidArgument(std::string(variable.name) + "=" + value + " is not 0 or 1 (" +
                                 variable.reason + ")");
        }
        if (value == "1") options->stall_check_seconds = 0;
        break;
    }
  }
  return Status::Ok();
}

bool IsHandledHorovodVariable(const std::string& name) {
  for (const HorovodVariable& variable : HorovodVariables()) {
    if (name == variable.name) return true;
  }
  return false;
}

}  // namespace kolo
