// Fuzz target: configuration text, which arrives from the environment a launcher or a user
// set up (DESIGN.md §7). The first byte picks the parser:
//   0: Options::FromMap over "NAME=VALUE" lines (a name "@k" stands for the k-th known name,
//      so that mutations keep hitting real variables). Checks: no crash, a deterministic
//      answer, and a returned Options that passes Validate();
//   1: ParseByteSize. Checks: a result is >= 0 and reads back from its text in K/M/G;
//   2: the SLURM node-list expander. Checks: an expanded list is non-empty, has no empty
//      name, and FirstSlurmNode agrees with its first name.
#include <map>
#include <string>

#include "core/config/config_table.h"
#include "core/config/slurm_nodelist.h"
#include "fuzz/fuzz_input.h"
#include "kolo/options.h"

namespace kolo {
namespace {

// Table names and aliases, and the launcher variables core/config/launcher_env.cc reads.
std::vector<std::string> KnownNames() {
  std::vector<std::string> names;
  for (const ConfigVar& var : ConfigTable()) {
    names.push_back(var.name);
    for (const char* alias : var.aliases) names.push_back(alias);
  }
  for (const char* name : {"LOCAL_RANK",
                           "LOCAL_WORLD_SIZE",
                           "MASTER_ADDR",
                           "MASTER_PORT",
                           "MPI_LOCALNRANKS",
                           "MPI_LOCALRANKID",
                           "OMPI_COMM_WORLD_LOCAL_RANK",
                           "OMPI_COMM_WORLD_LOCAL_SIZE",
                           "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_SIZE",
                           "PET_NNODES",
                           "PET_NODE_RANK",
                           "PET_NPROC_PER_NODE",
                           "PMIX_NAMESPACE",
                           "PMI_RANK",
                           "PMI_SIZE",
                           "RANK",
                           "SLURM_JOBID",
                           "SLURM_JOB_ID",
                           "SLURM_JOB_NODELIST",
                           "SLURM_LOCALID",
                           "SLURM_NODEID",
                           "SLURM_NODELIST",
                           "SLURM_NTASKS",
                           "SLURM_PROCID",
                           "SLURM_STEP_ID",
                           "SLURM_STEP_NODELIST",
                           "WORLD_SIZE"}) {
    names.push_back(name);
  }
  return names;
}

std::map<std::string, std::string> ParseLines(const std::string& text) {
  static const std::vector<std::string> known = KnownNames();
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const size_t eq = line.find('=');
    std::string name = line.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : line.substr(eq + 1);
    if (name.size() > 1 && name[0] == '@') {
      size_t index = 0;
      for (size_t i = 1; i < name.size() && i < 4; ++i) index = index * 10 + (name[i] & 0x0f);
      name = known[index % known.size()];
    }
    env[name] = value;
  }
  return env;
}

void FuzzOptions(const std::string& text) {
  const std::map<std::string, std::string> env = ParseLines(text);
  const StatusOr<Options> options = Options::FromMap(env);
  const StatusOr<Options> again = Options::FromMap(env);
  KOLO_FUZZ_CHECK(options.ok() == again.ok(), "FromMap answers differently twice");
  if (!options.ok()) {
    KOLO_FUZZ_CHECK(!options.status().message().empty(), "an error without a message");
    KOLO_FUZZ_CHECK(options.status().ToString() == again.status().ToString(),
                    "FromMap fails differently twice: %s / %s", options.status().ToString().c_str(),
                    again.status().ToString().c_str());
    return;
  }
  const Status valid = options->Validate();
  KOLO_FUZZ_CHECK(valid.ok(), "FromMap returned options that fail Validate(): %s",
                  valid.ToString().c_str());
}

void FuzzByteSize(const std::string& text) {
  const StatusOr<int64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) return;
  KOLO_FUZZ_CHECK(*bytes >= 0, "'%s' parsed as %lld", text.c_str(), static_cast<long long>(*bytes));
  // Reads back from its decimal text in the largest unit that divides it (plain numbers have
  // at most 15 digits, so a size from "974999999G" only reads back with its unit).
  const char* units[] = {"", "K", "M", "G"};
  int unit = 3;
  while (unit > 0 && *bytes % (int64_t{1} << (10 * unit)) != 0) --unit;
  const std::string text_again = std::to_string(*bytes >> (10 * unit)) + units[unit];
  const StatusOr<int64_t> again = ParseByteSize(text_again);
  KOLO_FUZZ_CHECK(again.ok() && *again == *bytes, "'%s' parsed as %lld, but '%s' does not",
                  text.c_str(), static_cast<long long>(*bytes), text_again.c_str());
}

void FuzzNodeList(const std::string& list) {
  const StatusOr<std::vector<std::string>> names = ExpandSlurmNodeList(list);
  if (!names.ok()) return;
  KOLO_FUZZ_CHECK(!names->empty(), "'%s' expands to nothing", list.c_str());
  for (const std::string& name : *names) {
    KOLO_FUZZ_CHECK(!name.empty(), "'%s' expands to an empty name", list.c_str());
  }
  const StatusOr<std::string> first = FirstSlurmNode(list);
  KOLO_FUZZ_CHECK(first.ok() && *first == names->front(),
                  "FirstSlurmNode('%s') gives %s, the expansion starts with %s", list.c_str(),
                  first.ok() ? first->c_str() : first.status().ToString().c_str(),
                  names->front().c_str());
}

}  // namespace
}  // namespace kolo

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.Byte() % 3;
  const std::string text = in.Bytes(4096);
  switch (mode) {
    case 0:
      kolo::FuzzOptions(text);
      break;
    case 1:
      kolo::FuzzByteSize(text);
      break;
    default:
      kolo::FuzzNodeList(text);
      break;
  }
  return 0;
}
