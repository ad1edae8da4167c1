// Where rank, size and the controller come from under each launcher (core/config/launcher_env.h),
// through Options::FromMap as init() sees them, and through DetectLauncher where the process
// facts (Hydra's parent pid) matter.
#include "core/config/launcher_env.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <set>

#include "kolo/options.h"

using kolo::Options;
using Env = std::map<std::string, std::string>;

namespace {

const Env kTorchrun = {{"RANK", "1"},         {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "1"},   {"LOCAL_WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "h0"}, {"MASTER_PORT", "29500"}};
const Env kOpenMpi = {{"OMPI_COMM_WORLD_RANK", "1"},
                      {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                      {"OMPI_MCA_ess_base_jobid", "334168065"},
                      {"PMIX_NAMESPACE", "334168065"}};
const Env kMpich = {{"PMI_RANK", "1"},
                    {"PMI_SIZE", "2"},
                    {"MPI_LOCALRANKID", "1"},
                    {"MPI_LOCALNRANKS", "2"},
                    {"PMI_FD", "6"}};
const Env kSlurm = {{"SLURM_PROCID", "3"},
                    {"SLURM_NTASKS", "4"},
                    {"SLURM_LOCALID", "1"},
                    {"SLURM_NODEID", "1"},
                    {"SLURM_JOB_ID", "4242"},
                    {"SLURM_STEP_ID", "0"},
                    {"SLURM_JOB_NODELIST", "gpu[07-08]"}};

Env With(Env env, const Env& more) {
  for (const auto& [k, v] : more) env[k] = v;
  return env;
}

Options Parse(const Env& env) {
  auto options = Options::FromMap(env);
  INFO(options.status().ToString());
  REQUIRE(options.ok());
  return *options;
}

std::string ParseError(const Env& env) {
  auto options = Options::FromMap(env);
  REQUIRE_FALSE(options.ok());
  CHECK(options.status().code() == kolo::StatusCode::kInvalidArgument);
  return options.status().message();
}

}  // namespace

TEST_CASE("torchrun's variables give rank, size, local rank and the controller",
          "[core][launcher]") {
  Options o = Parse(kTorchrun);
  CHECK(o.identity_source == "torchrun");
  CHECK(o.rank == 1);
  CHECK(o.size == 4);
  CHECK(o.local_rank == 1);
  CHECK(o.local_size == 2);
  CHECK(o.controller_address == "h0:29500");
  CHECK(o.controller_source == "MASTER_ADDR:MASTER_PORT");
  // KOLO_CONTROLLER_PORT moves kolo off a MASTER_PORT that torch.distributed uses itself.
  CHECK(Parse(With(kTorchrun, {{"KOLO_CONTROLLER_PORT", "29501"}})).controller_address ==
        "h0:29501");
}

TEST_CASE("Open MPI's variables give the identity; one host means a loopback controller",
          "[core][launcher]") {
  Options o = Parse(kOpenMpi);
  CHECK(o.identity_source == "Open MPI");
  CHECK(o.rank == 1);
  CHECK(o.size == 2);
  CHECK(o.local_rank == 1);
  CHECK(o.local_size == 2);
  const int port = kolo::DerivedControllerPort("ompi:334168065");
  CHECK(o.controller_address == "127.0.0.1:" + std::to_string(port));
  CHECK_THAT(o.controller_source, Catch::Contains("OMPI_MCA_ess_base_jobid=334168065"));

  // Open MPI 5 (PRRTE) has only the PMIx namespace.
  Env ompi5 = kOpenMpi;
  ompi5.erase("OMPI_MCA_ess_base_jobid");
  ompi5["PMIX_NAMESPACE"] = "prterun-vm-123@1";
  CHECK(Parse(ompi5).controller_address ==
        "127.0.0.1:" + std::to_string(kolo::DerivedControllerPort("ompi:prterun-vm-123@1")));

  CHECK(Parse(With(kOpenMpi, {{"KOLO_CONTROLLER_PORT", "23456"}})).controller_address ==
        "127.0.0.1:23456");
  CHECK(Parse(With(kOpenMpi, {{"KOLO_CONTROLLER", "node1:2000"}})).controller_address ==
        "node1:2000");
}

TEST_CASE("A multi-host MPI job without KOLO_CONTROLLER is refused with what to set",
          "[core][launcher]") {
  std::string ompi = ParseError(With(kOpenMpi, {{"OMPI_COMM_WORLD_SIZE", "4"}}));
  CHECK_THAT(ompi, Catch::Contains("several hosts") && Catch::Contains("KOLO_CONTROLLER") &&
                       Catch::Contains("mpirun -x KOLO_CONTROLLER"));
  std::string mpich = ParseError(With(kMpich, {{"PMI_SIZE", "4"}}));
  CHECK_THAT(mpich, Catch::Contains("MPI_LOCALNRANKS") && Catch::Contains("-genv KOLO_CONTROLLER"));
  // KOLO_CONTROLLER_PORT alone cannot say which host runs rank 0.
  CHECK_THAT(ParseError(With(kOpenMpi,
                             {{"OMPI_COMM_WORLD_SIZE", "4"}, {"KOLO_CONTROLLER_PORT", "23456"}})),
             Catch::Contains("several hosts"));
  CHECK(
      Parse(With(kOpenMpi, {{"OMPI_COMM_WORLD_SIZE", "4"}, {"KOLO_CONTROLLER", "n1:2000"}})).size ==
      4);
}

TEST_CASE("MPICH's variables give the identity; the port comes from Hydra's proxy pid",
          "[core][launcher]") {
  kolo::ProcessFacts facts;
  facts.parent_pid = 340;
  auto identity = kolo::DetectLauncher(kMpich, facts);
  REQUIRE(identity.ok());
  CHECK(identity->launcher == "MPICH");
  const std::string want = "127.0.0.1:" + std::to_string(kolo::DerivedControllerPort("hydra:340"));
  bool found = false;
  for (const auto& s : identity->settings) {
    if (s.kolo_name == "KOLO_CONTROLLER") found = s.value == want;
  }
  CHECK(found);
  CHECK_THAT(identity->controller_source, Catch::Contains("pid 340"));

  Options o = Parse(kMpich);  // this process's real parent
  CHECK(o.identity_source == "MPICH");
  CHECK(o.rank == 1);
  CHECK(o.size == 2);
  CHECK(o.local_rank == 1);
  CHECK(o.local_size == 2);
  CHECK(o.controller_address ==
        "127.0.0.1:" + std::to_string(kolo::DerivedControllerPort(
                           "hydra:" + std::to_string(static_cast<int>(getppid())))));
}

TEST_CASE("SLURM's variables give the identity and the first node hosts the controller",
          "[core][launcher]") {
  Options o = Parse(kSlurm);
  CHECK(o.identity_source == "SLURM");
  CHECK(o.rank == 3);
  CHECK(o.size == 4);
  CHECK(o.local_rank == 1);
  CHECK(o.local_size == -1);  // from the host names at init
  CHECK(o.controller_address ==
        "gpu07:" + std::to_string(kolo::DerivedControllerPort("slurm:4242.0")));
  CHECK_THAT(o.controller_source, Catch::Contains("first host of SLURM_JOB_NODELIST"));

  // The step's node list wins over the job's, SLURM_NODELIST is the last resort.
  CHECK_THAT(Parse(With(kSlurm, {{"SLURM_STEP_NODELIST", "cpu[3-4]"}})).controller_address,
             Catch::StartsWith("cpu3:"));
  Env old = kSlurm;
  old.erase("SLURM_JOB_NODELIST");
  old["SLURM_NODELIST"] = "n9,n10";
  CHECK_THAT(Parse(old).controller_address, Catch::StartsWith("n9:"));

  CHECK(Parse(With(kSlurm, {{"KOLO_CONTROLLER_PORT", "24000"}})).controller_address ==
        "gpu07:24000");
  CHECK(Parse(With(kSlurm, {{"MASTER_ADDR", "gpu08"}, {"MASTER_PORT", "29500"}}))
            .controller_address == "gpu08:29500");
  // Steps of one job get different ports.
  CHECK(Parse(With(kSlurm, {{"SLURM_STEP_ID", "1"}})).controller_address != o.controller_address);
}

TEST_CASE("SLURM jobs whose controller cannot be found are refused", "[core][launcher]") {
  CHECK_THAT(ParseError(With(kSlurm, {{"SLURM_JOB_NODELIST", "gpu[07-"}})),
             Catch::Contains("SLURM_JOB_NODELIST") && Catch::Contains("gpu[07-"));
  Env no_list = kSlurm;
  no_list.erase("SLURM_JOB_NODELIST");
  CHECK_THAT(ParseError(no_list), Catch::Contains("KOLO_CONTROLLER"));
  Env no_job = kSlurm;
  no_job.erase("SLURM_JOB_ID");
  CHECK_THAT(ParseError(no_job), Catch::Contains("KOLO_CONTROLLER_PORT"));
  // Rank 0 away from the first node: the rule would point at the wrong host.
  CHECK_THAT(ParseError(With(kSlurm, {{"SLURM_PROCID", "0"}, {"SLURM_NODEID", "1"}})),
             Catch::Contains("rank 0 runs on node 1"));
  CHECK_THAT(ParseError(With(kSlurm, {{"SLURM_PROCID", "x"}})), Catch::Contains("SLURM_PROCID"));
}

TEST_CASE("Launchers are tried in order: KOLO_, torchrun, Open MPI, MPICH, SLURM",
          "[core][launcher]") {
  const Env kolo = {{"KOLO_RANK", "0"}, {"KOLO_SIZE", "3"}, {"KOLO_CONTROLLER", "k:1"}};
  const Env all = With(With(With(With(kSlurm, kMpich), kOpenMpi), kTorchrun), kolo);
  Options o = Parse(all);
  CHECK(o.identity_source == "kolo");
  CHECK(o.size == 3);
  CHECK(o.local_rank == -1);  // LOCAL_RANK is torchrun's, and torchrun was not chosen
  CHECK(o.controller_address == "k:1");

  Env no_kolo = all;
  for (const auto& [k, v] : kolo) no_kolo.erase(k);
  CHECK(Parse(no_kolo).identity_source == "torchrun");
  for (const auto& [k, v] : kTorchrun) no_kolo.erase(k);
  CHECK(Parse(no_kolo).identity_source == "Open MPI");
  for (const auto& [k, v] : kOpenMpi) no_kolo.erase(k);
  CHECK(Parse(no_kolo).identity_source == "MPICH");
  for (const auto& [k, v] : kMpich) no_kolo.erase(k);
  CHECK(Parse(no_kolo).identity_source == "SLURM");
  for (const auto& [k, v] : kSlurm) no_kolo.erase(k);
  CHECK(Parse(no_kolo).identity_source.empty());

  // KOLO_LOCAL_* win over the launcher's local variables.
  Options local = Parse(With(kOpenMpi, {{"KOLO_LOCAL_RANK", "0"}, {"KOLO_LOCAL_SIZE", "1"}}));
  CHECK(local.local_rank == 0);
  CHECK(local.local_size == 1);
  // One rank under any launcher needs no controller.
  CHECK(Parse({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}).size == 1);
  CHECK(Parse({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).controller_address.empty());
}

TEST_CASE("Rank and size from different launchers are refused, naming both", "[core][launcher]") {
  const auto [rank_var, size_var] = GENERATE(table<std::string, std::string>({
      {"KOLO_RANK", "WORLD_SIZE"},
      {"RANK", "KOLO_SIZE"},
      {"RANK", "OMPI_COMM_WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "PMI_SIZE"},
      {"PMI_RANK", "SLURM_NTASKS"},
      {"SLURM_PROCID", "WORLD_SIZE"},
  }));
  std::string message = ParseError({{rank_var, "1"}, {size_var, "2"}, {"KOLO_CONTROLLER", "h:1"}});
  CHECK_THAT(message, Catch::Contains(rank_var) && Catch::Contains(size_var) &&
                          Catch::Contains("same launcher"));
}

TEST_CASE("A launcher's rank without its size is refused", "[core][launcher]") {
  CHECK_THAT(ParseError({{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}),
             Catch::Contains("WORLD_SIZE is set but RANK is not"));
  CHECK_THAT(ParseError({{"SLURM_PROCID", "1"}}),
             Catch::Contains("SLURM_PROCID is set but SLURM_NTASKS is not"));
  // KOLO_ alone keeps the table's defaults for the other.
  CHECK(Parse({{"KOLO_SIZE", "1"}}).rank == 0);
}

TEST_CASE("A Kubeflow PyTorchJob started without torchrun is refused with a hint",
          "[core][launcher]") {
  // What the training operator sets in a pod: RANK is the pod's index.
  const Env pod = {{"RANK", "1"},
                   {"WORLD_SIZE", "8"},
                   {"MASTER_ADDR", "job-master-0"},
                   {"MASTER_PORT", "23456"},
                   {"PET_NPROC_PER_NODE", "4"},
                   {"PET_NODE_RANK", "1"},
                   {"PET_NNODES", "2"},
                   {"KUBERNETES_SERVICE_HOST", "10.96.0.1"}};
  std::string message = ParseError(pod);
  CHECK_THAT(message,
             Catch::Contains("Kubeflow") && Catch::Contains("torchrun") && Catch::Contains("pod"));
  // torchrun inside the pod sets LOCAL_RANK and a process RANK: accepted.
  Options o = Parse(With(pod, {{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}}));
  CHECK(o.rank == 5);
  CHECK(o.identity_source == "torchrun");
  // One process per pod: the pod's index is the process's rank.
  CHECK(Parse(With(pod, {{"PET_NPROC_PER_NODE", "1"}, {"WORLD_SIZE", "2"}})).rank == 1);
}

TEST_CASE("Derived controller ports stay in [20000, 32767] and differ between jobs",
          "[core][launcher]") {
  std::set<int> ports;
  for (int job = 0; job < 200; ++job) {
    int port = kolo::DerivedControllerPort("slurm:" + std::to_string(job) + ".0");
    CHECK(port >= 20000);
    CHECK(port <= 32767);
    ports.insert(port);
  }
  CHECK(ports.size() > 190);  // FNV-1a spreads consecutive job ids
  CHECK(kolo::DerivedControllerPort("ompi:1") == kolo::DerivedControllerPort("ompi:1"));
}

TEST_CASE("KOLO_CONTROLLER_PORT is checked and cannot be combined with KOLO_CONTROLLER",
          "[core][launcher]") {
  CHECK_THAT(ParseError(With(kOpenMpi, {{"KOLO_CONTROLLER_PORT", "0"}})),
             Catch::Contains("KOLO_CONTROLLER_PORT='0'"));
  CHECK_THAT(
      ParseError(With(kOpenMpi, {{"KOLO_CONTROLLER_PORT", "1"}, {"KOLO_CONTROLLER", "h:1"}})),
      Catch::Contains("both"));
}
