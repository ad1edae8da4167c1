#include "core/config/launcher_env.h"

#include <unistd.h>

#include <cstdint>

#include "core/config/config_values.h"
#include "core/config/slurm_nodelist.h"

namespace kolo {
namespace {

using Env = std::map<std::string, std::string>;

// A launcher's names for the identity of a process, in the order kolo tries them.
struct Source {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;  // nullptr: the launcher has none (derived from host names)
  const char* local_size;
};

constexpr Source kSources[] = {
    {"kolo", "KOLO_RANK", "KOLO_SIZE", "KOLO_LOCAL_RANK", "KOLO_LOCAL_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    // SLURM_NTASKS_PER_NODE is not always set, and SLURM_STEP_TASKS_PER_NODE is compressed
    // ("2(x3),1"): the local size comes from the host names instead.
    {"SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

const std::string* Find(const Env& env, const char* name) {
  if (name == nullptr) return nullptr;
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// The config table's integer grammar; false for anything else (the table's row reports the
// error).
bool ToInt(const std::string* text, long* out) {
  int64_t v = 0;
  if (text == nullptr || !ParseDecimalInteger(*text, &v)) return false;
  *out = static_cast<long>(v);
  return true;
}

// The launcher that gives a rank or a size; fails when rank and size would come from two.
StatusOr<const Source*> ChooseSource(const Env& env) {
  const Source* chosen = nullptr;
  for (const Source& source : kSources) {
    if (Find(env, source.rank) || Find(env, source.size)) {
      chosen = &source;
      break;
    }
  }
  if (chosen == nullptr) return static_cast<const Source*>(nullptr);
  const bool has_rank = Find(env, chosen->rank) != nullptr;
  const bool has_size = Find(env, chosen->size) != nullptr;
  if (has_rank && has_size) return chosen;
  const char* present = has_rank ? chosen->rank : chosen->size;
  const char* missing = has_rank ? chosen->size : chosen->rank;
  for (const Source& other : kSources) {
    const char* other_name = has_rank ? other.size : other.rank;
    if (&other != chosen && Find(env, other_name)) {
      return InvalidArgument(std::string("rank and size must come from the same launcher, but ") +
                             present + " (" + chosen->launcher + ") is set without " + missing +
                             ", and " + other_name + " (" + other.launcher + ") is set without " +
                             (has_rank ? other.rank : other.size) + "; set both " + chosen->rank +
                             " and " + chosen->size + ", or neither");
    }
  }
  // KOLO_RANK alone means size 1 and KOLO_SIZE alone rank 0 (the table's defaults), as before;
  // a size of 1 alone (a one-task SLURM allocation's batch script) is a one-rank job.
  if (std::string(chosen->launcher) == "kolo") return chosen;
  if (has_size && *Find(env, chosen->size) == "1") return chosen;
  return InvalidArgument(std::string(present) + " is set but " + missing +
                         " is not: kolo takes rank and size from " + chosen->launcher +
                         " only when both are set" +
                         (std::string(chosen->launcher) == "SLURM"
                              ? " (start the program with srun, not directly in the batch script)"
                              : ""));
}

// A Kubeflow PyTorchJob sets RANK to the pod's index and WORLD_SIZE to pods x processes per
// pod, for torchrun inside the pod to turn into process ranks. Without torchrun (no
// LOCAL_RANK), RANK is a process rank only when each pod runs one process.
Status CheckKubeflow(const Env& env) {
  if (Find(env, "LOCAL_RANK") != nullptr) return Status::Ok();
  const std::string* nproc = Find(env, "PET_NPROC_PER_NODE");
  if (!nproc && !Find(env, "PET_NNODES") && !Find(env, "PET_NODE_RANK")) return Status::Ok();
  if (nproc && *nproc == "1") return Status::Ok();
  return InvalidArgument(
      "RANK and WORLD_SIZE come from a Kubeflow PyTorchJob (PET_NNODES/PET_NPROC_PER_NODE are "
      "set, LOCAL_RANK is not): there RANK is the pod's index, not this process's rank. Start "
      "the program through torchrun inside the pod (`torchrun your_program ...`; torchrun "
      "reads the PET_* variables), or set PET_NPROC_PER_NODE=1 for one process per pod");
}

Status ParsePortOverride(const Env& env, std::string* port) {
  const std::string* text = Find(env, "KOLO_CONTROLLER_PORT");
  if (text == nullptr) return Status::Ok();
  KOLO_ASSIGN_OR_RETURN(int64_t number, ParseIntegerValue("KOLO_CONTROLLER_PORT", *text, 1, 65535));
  *port = std::to_string(number);  // "007" is port 7
  return Status::Ok();
}

struct Controller {
  std::string address;
  std::string source_var;  // named by the table row's errors
  std::string how;         // for logs and errors
};

StatusOr<Controller> SlurmController(const Env& env, const std::string& port_override,
                                     const std::string& rank) {
  const char* list_var = nullptr;
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (Find(env, name)) {
      list_var = name;
      break;
    }
  }
  if (list_var == nullptr) {
    return InvalidArgument(
        "SLURM job without a node list (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or "
        "SLURM_NODELIST): kolo cannot find rank 0's host; set KOLO_CONTROLLER=host:port");
  }
  const std::string* node_id = Find(env, "SLURM_NODEID");
  if (rank == "0" && node_id != nullptr && *node_id != "0") {
    return InvalidArgument("rank 0 runs on node " + *node_id + " of " + list_var +
                           ", not the first, so the controller cannot be found there; set "
                           "KOLO_CONTROLLER=<rank 0's host>:<port> for every rank");
  }
  StatusOr<std::string> host = FirstSlurmNode(env.at(list_var));
  if (!host.ok()) return host.status().WithContext(list_var);
  Controller c;
  c.source_var = list_var;
  c.how = std::string("first host of ") + list_var + ", ";
  std::string port = port_override;
  if (port.empty()) {
    const std::string* job = Find(env, "SLURM_JOB_ID");
    if (job == nullptr) job = Find(env, "SLURM_JOBID");
    if (job == nullptr) {
      return InvalidArgument(
          "SLURM job without SLURM_JOB_ID: kolo cannot derive the "
          "controller's port; set KOLO_CONTROLLER_PORT");
    }
    const std::string* step = Find(env, "SLURM_STEP_ID");
    std::string id = *job + (step ? "." + *step : "");
    port = std::to_string(DerivedControllerPort("slurm:" + id));
    c.how +=
        "port derived from SLURM_JOB_ID" + std::string(step ? ".SLURM_STEP_ID" : "") + "=" + id;
  } else {
    c.how += "port from KOLO_CONTROLLER_PORT";
  }
  c.address = *host + ":" + port;
  return c;
}

// Open MPI and Hydra on one host: rank 0 is on this host, so loopback reaches it.
StatusOr<Controller> SingleHostMpiController(const Env& env, const Source& source, long size,
                                             const ProcessFacts& facts,
                                             const std::string& port_override) {
  const bool open_mpi = std::string(source.launcher) == "Open MPI";
  long local_size = 0;
  if (!ToInt(Find(env, source.local_size), &local_size) || local_size != size) {
    const char* example = open_mpi ? "mpirun -x KOLO_CONTROLLER=node1:29400 ..."
                                   : "mpiexec -genv KOLO_CONTROLLER node1:29400 ...";
    return InvalidArgument(
        std::string("this ") + source.launcher + " job spans several hosts (" + source.local_size +
        "=" + (Find(env, source.local_size) ? *Find(env, source.local_size) : "(unset)") +
        " is not " + source.size + "=" + std::to_string(size) +
        "), and kolo cannot tell which host runs rank 0: set KOLO_CONTROLLER=<rank 0's "
        "host>:<port> for every rank (" +
        example + ")");
  }
  Controller c;
  c.how = std::string("one-host ") + source.launcher + " job: loopback, ";
  std::string port = port_override;
  if (!port.empty()) {
    c.how += "port from KOLO_CONTROLLER_PORT";
  } else if (open_mpi) {
    const char* id_var = Find(env, "OMPI_MCA_ess_base_jobid") ? "OMPI_MCA_ess_base_jobid"
                         : Find(env, "PMIX_NAMESPACE")        ? "PMIX_NAMESPACE"
                                                              : nullptr;
    if (id_var == nullptr) {
      return InvalidArgument(
          "Open MPI job without OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE: "
          "kolo cannot derive the controller's port; set "
          "KOLO_CONTROLLER_PORT");
    }
    port = std::to_string(DerivedControllerPort("ompi:" + env.at(id_var)));
    c.how += std::string("port derived from ") + id_var + "=" + env.at(id_var);
  } else {
    // Hydra exports no job id; the ranks of one host share their parent, hydra_pmi_proxy.
    const std::string ppid = std::to_string(facts.parent_pid);
    port = std::to_string(DerivedControllerPort("hydra:" + ppid));
    c.how += "port derived from the parent process (hydra_pmi_proxy) pid " + ppid;
  }
  c.source_var = source.size;
  c.address = "127.0.0.1:" + port;
  return c;
}

// The controller's address: KOLO_CONTROLLER, else MASTER_ADDR with MASTER_PORT (or
// KOLO_CONTROLLER_PORT), else the launcher's rule. No address: Options::Validate says what to
// set when the job needs one.
StatusOr<Controller> ChooseController(const Env& env, const Source* source,
                                      const ProcessFacts& facts) {
  std::string port_override;
  KOLO_RETURN_IF_ERROR(ParsePortOverride(env, &port_override));
  if (const std::string* explicit_address = Find(env, "KOLO_CONTROLLER")) {
    if (!port_override.empty()) {
      return InvalidArgument(
          "KOLO_CONTROLLER and KOLO_CONTROLLER_PORT are both set; set only "
          "KOLO_CONTROLLER=host:port");
    }
    return Controller{*explicit_address, "KOLO_CONTROLLER", "KOLO_CONTROLLER"};
  }
  const std::string* master_addr = Find(env, "MASTER_ADDR");
  const std::string* master_port = Find(env, "MASTER_PORT");
  if (master_addr || master_port) {
    if (!master_addr || (!master_port && port_override.empty())) {
      return InvalidArgument("MASTER_ADDR and MASTER_PORT must be set together");
    }
    if (!port_override.empty()) {
      return Controller{*master_addr + ":" + port_override, "MASTER_ADDR",
                        "MASTER_ADDR:KOLO_CONTROLLER_PORT"};
    }
    return Controller{*master_addr + ":" + *master_port, "MASTER_ADDR:MASTER_PORT",
                      "MASTER_ADDR:MASTER_PORT"};
  }
  long size = 0;
  if (source == nullptr || !ToInt(Find(env, source->size), &size) || size <= 1) {
    return Controller{};  // one rank needs no fixed port; kolo and torchrun give their own
  }
  const std::string launcher = source->launcher;
  if (launcher == "SLURM") return SlurmController(env, port_override, env.at(source->rank));
  if (launcher == "Open MPI" || launcher == "MPICH") {
    return SingleHostMpiController(env, *source, size, facts, port_override);
  }
  return Controller{};
}

}  // namespace

ProcessFacts CurrentProcessFacts() {
  ProcessFacts facts;
  facts.parent_pid = static_cast<int>(getppid());
  return facts;
}

bool IsIdentityVariable(const std::string& kolo_name) {
  for (const char* name : {"KOLO_RANK", "KOLO_SIZE", "KOLO_LOCAL_RANK", "KOLO_LOCAL_SIZE",
                           "KOLO_CONTROLLER", "KOLO_CONTROLLER_PORT"}) {
    if (kolo_name == name) return true;
  }
  return false;
}

StatusOr<LauncherIdentity> DetectLauncher(const Env& env, const ProcessFacts& facts) {
  KOLO_ASSIGN_OR_RETURN(const Source* source, ChooseSource(env));
  LauncherIdentity identity;
  if (source != nullptr) {
    identity.launcher = source->launcher;
    if (identity.launcher == "torchrun") KOLO_RETURN_IF_ERROR(CheckKubeflow(env));
    if (const std::string* v = Find(env, source->rank)) {
      identity.settings.push_back({"KOLO_RANK", source->rank, *v});
    }
    if (const std::string* v = Find(env, source->size)) {
      identity.settings.push_back({"KOLO_SIZE", source->size, *v});
    }
  }
  // KOLO_LOCAL_* win over any launcher's; otherwise the chosen launcher's own, if it has them.
  const std::pair<const char*, const char*> locals[] = {
      {"KOLO_LOCAL_RANK", source ? source->local_rank : nullptr},
      {"KOLO_LOCAL_SIZE", source ? source->local_size : nullptr}};
  for (const auto& [kolo_name, launcher_name] : locals) {
    const char* name = Find(env, kolo_name) ? kolo_name : launcher_name;
    if (const std::string* v = Find(env, name)) identity.settings.push_back({kolo_name, name, *v});
  }
  KOLO_ASSIGN_OR_RETURN(Controller controller, ChooseController(env, source, facts));
  if (!controller.address.empty() || controller.source_var == "KOLO_CONTROLLER") {
    // KOLO_CONTROLLER set empty goes to the row too, which refuses it.
    identity.settings.push_back({"KOLO_CONTROLLER", controller.source_var, controller.address});
    identity.controller_source = controller.how;
  }
  return identity;
}

int DerivedControllerPort(const std::string& job_id) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (unsigned char c : job_id) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return 20000 + static_cast<int>(hash % 12768);
}

}  // namespace kolo
