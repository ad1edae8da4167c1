// The config table itself (core/config/config_table.h): its rows are consistent (names and aliases
// unique, defaults inside their ranges, printable as markdown), values outside a range are
// refused naming the variable and the range, and Options' defaults and KOLO_TRANSPORT come
// from it.
#include "core/config/config_table.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kolo/options.h"

using kolo::ConfigKind;
using kolo::ConfigTable;
using kolo::ConfigVar;
using kolo::FindConfigVar;
using kolo::GpuOperations;
using kolo::Options;
using kolo::Transport;

namespace {

bool IsNumeric(ConfigKind kind) {
  return kind == ConfigKind::kInteger || kind == ConfigKind::kNumber ||
         kind == ConfigKind::kByteSize || kind == ConfigKind::kPort;
}

// The value's text as the row's parser reads it (byte sizes and integers as whole numbers).
std::string Text(const ConfigVar& var, double value) {
  if (var.kind == ConfigKind::kNumber) {
    std::ostringstream out;
    out << value;
    return out.str();
  }
  return std::to_string(static_cast<int64_t>(value));
}

// The '|' that separate markdown cells (not the escaped "\|" inside one).
int CellSeparators(const std::string& row) {
  int count = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] == '|' && (i == 0 || row[i - 1] != '\\')) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("Config names and aliases are unique across the table", "[core][config]") {
  std::set<std::string> seen;
  for (const ConfigVar& var : ConfigTable()) {
    INFO(var.name);
    CHECK(seen.insert(var.name).second);
    CHECK(std::string(var.name).rfind("KOLO_", 0) == 0);
    for (const char* alias : var.aliases) {
      INFO(alias);
      CHECK(seen.insert(alias).second);
      CHECK(std::string(alias).rfind("KOLO_", 0) != 0);  // a KOLO_ alias would be refused
    }
  }
  CHECK(seen.size() > ConfigTable().size());  // some rows have Horovod aliases
}

TEST_CASE("Every config row's default lies in its range", "[core][config]") {
  const Options defaults;
  for (const ConfigVar& var : ConfigTable()) {
    INFO(var.name << ": default " << var.default_text << ", range " << var.range);
    CHECK(var.check(defaults).ok());
    CHECK_FALSE(var.default_text.empty());
    CHECK_FALSE(var.range.empty());
    CHECK_FALSE(var.expected.empty());
    CHECK(std::string(var.help).size() > 10);
    if (IsNumeric(var.kind)) CHECK(var.lo <= var.hi);
  }
  CHECK(kolo::CheckConfigRanges(defaults).ok());
  CHECK(defaults.Validate().ok());
}

TEST_CASE("A config value outside its range fails naming the variable and the range",
          "[core][config]") {
  int checked = 0;
  for (const ConfigVar& var : ConfigTable()) {
    if (!IsNumeric(var.kind)) continue;
    const std::string interval = var.range.substr(0, var.range.find(']') + 1);
    // Just above the top, and just below the bottom.
    std::vector<double> outside = {var.kind == ConfigKind::kNumber ? var.hi * 1.5 + 1 : var.hi + 1,
                                   var.kind == ConfigKind::kNumber ? var.lo - 0.05 : var.lo - 1};
    for (double value : outside) {
      const std::string text = Text(var, value);
      INFO(var.name << "=" << text);
      Options options;
      const kolo::Status status = var.apply(var.name, text, &options);
      REQUIRE_FALSE(status.ok());
      CHECK(status.code() == kolo::StatusCode::kInvalidArgument);
      CHECK_THAT(status.message(), Catch::Contains(var.name) && Catch::Contains(text));
      CHECK_THAT(status.message(), Catch::Contains(interval));
      ++checked;
    }
    // The bounds themselves are inside.
    Options options;
    if (var.kind != ConfigKind::kByteSize) {
      CHECK(var.apply(var.name, Text(var, var.lo), &options).ok());
      CHECK(var.apply(var.name, Text(var, var.hi), &options).ok());
    }
  }
  CHECK(checked >= 20);
}

TEST_CASE("Options built by hand outside a range fail naming the variable and the range",
          "[core][config]") {
  Options timeout;
  timeout.timeout_seconds = 0.05;
  CHECK(timeout.Validate().message() ==
        "KOLO_TIMEOUT_SECONDS=0.05 is invalid: expected a number in [0.1, 86400]");
  Options cache;
  cache.cache_capacity = 1000001;
  CHECK(cache.Validate().message() ==
        "KOLO_CACHE_CAPACITY=1000001 is invalid: expected an integer in [0, 1000000]");
  Options fusion;
  fusion.fusion_threshold_bytes = -1;
  CHECK_THAT(fusion.Validate().message(),
             Catch::StartsWith("KOLO_FUSION_THRESHOLD=-1 is invalid: expected a byte size in "
                               "[0, 4G]"));
  Options level;
  level.log_level = "loud";
  CHECK(level.Validate().message() ==
        "KOLO_LOG_LEVEL='loud' is invalid: expected one of trace, debug, info, warning, error, "
        "fatal, off");
  Options transport;
  transport.transport = static_cast<Transport>(7);
  CHECK_THAT(transport.Validate().message(), Catch::Contains("KOLO_TRANSPORT"));
  Options local;
  local.local_rank = -1;  // unset: computed at init()
  local.local_size = -1;
  CHECK(local.Validate().ok());
  local.local_rank = -2;
  CHECK_THAT(local.Validate().message(), Catch::StartsWith("KOLO_LOCAL_RANK=-2 is invalid"));
}

TEST_CASE("Printed defaults and ranges come from the typed rows", "[core][config]") {
  const Options defaults;
  CHECK(FindConfigVar("KOLO_FUSION_THRESHOLD").default_text == "64M");
  CHECK(defaults.fusion_threshold_bytes == int64_t{64} << 20);
  CHECK(FindConfigVar("KOLO_FUSION_THRESHOLD").range == "[0, 4G] bytes");
  CHECK(FindConfigVar("KOLO_TIMEOUT_SECONDS").default_text == "30");
  CHECK(FindConfigVar("KOLO_TIMEOUT_SECONDS").range == "[0.1, 86400] s");
  CHECK(defaults.timeout_seconds == 30.0);
  CHECK(FindConfigVar("KOLO_RANK").default_text == "from the launcher, else 0");
  CHECK(FindConfigVar("KOLO_LOCAL_RANK").default_text == "from the launcher, else from host names");
  CHECK(defaults.local_rank == -1);
  CHECK(FindConfigVar("KOLO_LOG_LEVEL").range == "trace|debug|info|warning|error|fatal|off");
  CHECK(defaults.log_level == FindConfigVar("KOLO_LOG_LEVEL").default_text);
  CHECK(FindConfigVar("KOLO_FAST_PATH").default_text == "1");
  CHECK(defaults.fast_path);
  // Component configs take theirs from Options.
  CHECK(kolo::DefaultOptions().stall_check_seconds == defaults.stall_check_seconds);
}

TEST_CASE("KOLO_TRANSPORT is an enum named by the table", "[core][config]") {
  CHECK(Options().transport == Transport::kAuto);
  for (Transport t : {Transport::kAuto, Transport::kTcp, Transport::kShm}) {
    INFO(kolo::TransportName(t));
    auto parsed = kolo::TransportFromName(kolo::TransportName(t));
    REQUIRE(parsed.ok());
    CHECK(*parsed == t);
  }
  CHECK(std::string(kolo::TransportName(Transport::kShm)) == "shm");
  auto shm = Options::FromMap({{"KOLO_TRANSPORT", "shm"}});
  REQUIRE(shm.ok());
  CHECK(shm->transport == Transport::kShm);
  auto bad = Options::FromMap({{"KOLO_TRANSPORT", "rdma"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "KOLO_TRANSPORT='rdma' is invalid: expected one of auto, tcp, shm");
  CHECK(kolo::TransportFromName("TCP").ok());  // any case, as HOROVOD_GPU_OPERATIONS=NCCL
  CHECK_FALSE(kolo::TransportFromName("tcp ").ok());
}

TEST_CASE("KOLO_GPU_OPERATIONS takes Horovod's name and spelling; anything else names the variable",
          "[core][config]") {
  CHECK(Options().gpu_operations == GpuOperations::kAuto);
  auto horovod = Options::FromMap({{"HOROVOD_GPU_OPERATIONS", "NCCL"}});
  REQUIRE(horovod.ok());
  CHECK(horovod->gpu_operations == GpuOperations::kNccl);
  auto ring =
      Options::FromMap({{"KOLO_GPU_OPERATIONS", "ring"}, {"HOROVOD_GPU_OPERATIONS", "NCCL"}});
  REQUIRE(ring.ok());
  CHECK(ring->gpu_operations == GpuOperations::kRing);  // kolo's name wins over the alias
  auto mpi = Options::FromMap({{"HOROVOD_GPU_OPERATIONS", "MPI"}});
  REQUIRE_FALSE(mpi.ok());
  CHECK(mpi.status().message() ==
        "HOROVOD_GPU_OPERATIONS='MPI' is invalid: expected one of auto, nccl, ring");
  CHECK(std::string(kolo::GpuOperationsName(GpuOperations::kRing)) == "ring");
}

TEST_CASE("The table prints as markdown rows of four cells", "[core][config]") {
  const std::vector<std::string> rows = kolo::ConfigTableMarkdownRows();
  REQUIRE(rows.size() == ConfigTable().size() + 2);  // header, separator, one per variable
  for (const std::string& row : rows) {
    INFO(row);
    CHECK(CellSeparators(row) == 5);
    CHECK_FALSE(std::regex_search(row, std::regex("<[A-Za-z/]")));  // markdown would hide a tag
  }
  CHECK(rows[2].rfind("| `KOLO_RANK` | from the launcher, else 0 | [0, 1048575] |", 0) == 0);
  const std::string text = kolo::FormatConfigTable();
  for (const std::string& row : rows) CHECK_THAT(text, Catch::Contains(row + "\n"));
  CHECK_THAT(text, Catch::Contains("`KOLO_LOG_LEVEL` (`HOROVOD_LOG_LEVEL`) | warning | "
                                   "trace\\|debug\\|info\\|warning\\|error\\|fatal\\|off |"));
}
