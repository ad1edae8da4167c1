// README.md's "Environment variables" tables are copies of `kolorun --help-env`'s markdown rows:
// the config table (core/config/config_table.cc) and then the table of Horovod's variables
// (core/config/horovod_env.cc). This test fails, naming the row, when the two differ: a variable,
// default, range, help text or Horovod variable's handling changed in the code but not in the
// README, or the other way round. Fix it by pasting the rows that `kolorun --help-env` prints
// into README.md.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/watchdog.h"

namespace kolo::testing {
namespace {

struct TableRow {
  int line = 0;  // 1-based, in its source
  std::string text;
};

// The lines that start with '|' among `lines`, from the first line after `heading` (all lines
// when `heading` is empty) up to the next "## " heading.
std::vector<TableRow> TableRows(const std::vector<std::string>& lines, const std::string& heading) {
  std::vector<TableRow> rows;
  bool inside = heading.empty();
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (!heading.empty() && line.rfind("## ", 0) == 0) {
      if (inside) break;
      inside = line == heading;
      continue;
    }
    if (inside && line.rfind("|", 0) == 0) rows.push_back({static_cast<int>(i + 1), line});
  }
  return rows;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("README.md's environment table is what kolorun --help-env prints", "[tools][config]") {
  Watchdog watchdog("kolorun --help-env against README.md", std::chrono::seconds(30));
  ProcessResult help = RunProcess({KOLORUN_PATH, "--help-env"});
  REQUIRE(help.exit_code == 0);
  const std::vector<TableRow> printed = TableRows(SplitLines(help.out), "");
  const std::string readme = ReadFile(KOLO_README_PATH);
  REQUIRE_FALSE(readme.empty());
  const std::vector<TableRow> copied = TableRows(SplitLines(readme), "## Environment variables");
  REQUIRE(printed.size() > 2);
  INFO("README.md has " << copied.size() << " table rows under \"## Environment variables\", "
                        << "kolorun --help-env prints " << printed.size());
  for (size_t i = 0; i < std::max(printed.size(), copied.size()); ++i) {
    const std::string want = i < printed.size() ? printed[i].text : "(no such row)";
    const std::string got = i < copied.size() ? copied[i].text : "(no such row)";
    if (want == got) continue;
    FAIL_CHECK(
        "row " << i + 1 << " of the table differs"
               << (i < copied.size() ? " (README.md line " + std::to_string(copied[i].line) + ")"
                                     : "")
               << ":\n  README.md:           " << got << "\n  kolorun --help-env:  " << want);
  }
}

}  // namespace
}  // namespace kolo::testing
