// Scenario 8 of docs/RELIABILITY.md: bad values for every variable of the config table, under
// its KOLO_ name and every alias, are refused with a message naming the variable and the value.
// The test walks ConfigTable() itself, so a new row is covered (or, if its range is of a kind
// this test does not know, fails here until someone says what a bad value for it is).
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "kolo/options.h"

namespace {

enum class Kind { kNumber, kHostPort, kChoice, kSecret, kText, kRankLists };

// What the row's documented range says its values are.
Kind KindOf(const kolo::ConfigVar& var) {
  const std::string range = var.range;
  if (range.rfind("[", 0) == 0) return Kind::kNumber;
  if (range == "host:port") return Kind::kHostPort;
  if (range.find('|') != std::string::npos) return Kind::kChoice;
  if (range.rfind("hex", 0) == 0) return Kind::kSecret;
  if (range == "rank lists") return Kind::kRankLists;
  // Free text: the value is a name, a path or a secret, checked where it is used.
  if (range == "text" || range == "hex text" || range == "file path" || range == "IP address" ||
      range == "PEM file path" || range.rfind("text, <=", 0) == 0) {
    return Kind::kText;
  }
  FAIL("config row " << var.name << " has a range ('" << range
                     << "') of a kind this test does not know: add its bad values here");
  return Kind::kText;
}

std::vector<std::string> BadValues(Kind kind) {
  switch (kind) {
    case Kind::kNumber:  // non-numeric, negative, overflowing (int64, double), empty
      return {"abc", "12abc", "-1", "-0.5", "99999999999999999999", "1e999", "nan", ""};
    case Kind::kHostPort:
      return {"host", "host:abc", "host:-1", "host:99999999999999999999", ":1"};
    case Kind::kChoice:
      return {"abc", "-1", "99999999999999999999"};
    case Kind::kSecret:  // not hex, an odd number of digits, too short
      return {std::string(64, 'x'), std::string(63, 'a'), "00ff"};
    case Kind::kText:
      return {};
    case Kind::kRankLists:  // not numbers, empty ranks or sets, negative, overflowing
      return {"abc", "0,,1", "0;;1", "-1", "99999999999999999999"};
  }
  return {};
}

// Values that make an otherwise valid job, so that a row's value is the only thing wrong.
std::map<std::string, std::string> Base(const std::string& name) {
  if (name == "KOLO_CONTROLLER_PORT") return {{"MASTER_ADDR", "127.0.0.1"}};
  return {};
}

}  // namespace

TEST_CASE("Every config variable refuses non-numeric, negative and overflowing values by name",
          "[core][options][fault]") {
  int checked = 0;
  for (const kolo::ConfigVar& var : kolo::ConfigTable()) {
    std::vector<std::string> names = {var.name};
    names.insert(names.end(), var.aliases.begin(), var.aliases.end());
    for (const std::string& name : names) {
      for (const std::string& value : BadValues(KindOf(var))) {
        INFO(name << "='" << value << "'");
        std::map<std::string, std::string> env = Base(var.name);
        env[name] = value;
        auto options = kolo::Options::FromMap(env);
        CHECK_FALSE(options.ok());
        if (options.ok()) continue;
        CHECK(options.status().code() == kolo::StatusCode::kInvalidArgument);
        CHECK_THAT(options.status().message(), Catch::Contains(name));
        if (KindOf(var) == Kind::kSecret) {
          // A secret is never quoted, not even a malformed one.
          CHECK_THAT(options.status().message(), !Catch::Contains(value));
        } else if (!value.empty()) {
          CHECK_THAT(options.status().message(), Catch::Contains(value));
        }
        ++checked;
      }
    }
  }
  CHECK(checked > 100);  // the table has ~20 rows, most of them numeric
}
