// Where a process's rank, size, local rank/size and the controller's address come from when it
// was started by a launcher other than kolorun: torchrun, Open MPI's mpirun, MPICH's Hydra
// (mpiexec) or SLURM's srun (rules in docs/DESIGN-NOTES.md, "Launchers"). Options::FromMap calls
// it; plain functions over the environment map, safe from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// Facts about the process that are not in its environment. Hydra exports no job identifier,
// but every rank it starts on a host is a child of the same hydra_pmi_proxy.
struct ProcessFacts {
  int parent_pid = 0;
};
ProcessFacts CurrentProcessFacts();

// One value for a row of the config table: `kolo_name` (KOLO_RANK, KOLO_SIZE, KOLO_LOCAL_RANK,
// KOLO_LOCAL_SIZE, KOLO_CONTROLLER) gets `value`, read from (or made from) `source`, which the
// row's errors name.
struct IdentitySetting {
  std::string kolo_name;
  std::string source;
  std::string value;
};

struct LauncherIdentity {
  // "kolo", "torchrun", "Open MPI", "MPICH", "SLURM"; empty when no launcher variable is set
  // (a one-rank job).
  std::string launcher;
  std::vector<IdentitySetting> settings;
  // How the controller address was chosen ("KOLO_CONTROLLER", "MASTER_ADDR:MASTER_PORT",
  // "first host of SLURM_STEP_NODELIST, port from SLURM_JOB_ID=42 ..."); empty when none was.
  std::string controller_source;
};

// The identity variables this module reads itself; Options::FromMap skips their table rows.
bool IsIdentityVariable(const std::string& kolo_name);

// Finds the launcher and the identity it gives. Fails with a message naming the variables on:
// rank and size from different launchers (or one of them missing), a Kubeflow PyTorchJob
// started without torchrun, an unreadable SLURM node list, or a multi-host MPI job without
// KOLO_CONTROLLER.
StatusOr<LauncherIdentity> DetectLauncher(const std::map<std::string, std::string>& env,
                                          const ProcessFacts& facts);

// The controller port kolo derives from a launcher's job identifier when the launcher gives
// none: 20000 + FNV-1a(job_id) mod 12768, i.e. in [20000, 32767], below Linux's ephemeral range.
int DerivedControllerPort(const std::string& job_id);

}  // namespace kolo
