// Issue 53 (F9): every variable of the config table, under its KOLO_ name and every alias, is fed
// hostile values (hex, spaces, empty, huge, negative, NaN, trailing garbage, wrong case, other
// kinds' values). Each must be either accepted with the meaning the table documents, or refused
// with InvalidArgument naming the variable. What the table documents is written out below from
// the row's kind and its printed range (the grammar of `kolorun --help-env`, kConfigValueGrammar),
// independently of kolo's parsers; "the meaning" is checked by comparing what the hostile value
// gave with what a plain spelling of the same value gives, over every row's value_text.
#include <arpa/inet.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/config/config_table.h"
#include "kolo/options.h"

using kolo::ConfigKind;
using kolo::ConfigVar;
using kolo::Options;

namespace {

enum class ValueKind {
  kInteger,
  kNumber,
  kBytes,
  kBool,
  kChoice,
  kText,
  kHostPort,
  kIp,
  kSets,
  kSecret
};

ValueKind ValueKindOf(const ConfigVar& var) {
  if (var.range == "IP address") return ValueKind::kIp;
  if (var.range == "rank lists") return ValueKind::kSets;
  switch (var.kind) {
    case ConfigKind::kInteger:
    case ConfigKind::kPort:
      return ValueKind::kInteger;
    case ConfigKind::kNumber:
      return ValueKind::kNumber;
    case ConfigKind::kByteSize:
      return ValueKind::kBytes;
    case ConfigKind::kBool:
      return ValueKind::kBool;
    case ConfigKind::kChoice:
      return ValueKind::kChoice;
    case ConfigKind::kHostPort:
      return ValueKind::kHostPort;
    case ConfigKind::kSecret:
      return ValueKind::kSecret;
    default:
      return ValueKind::kText;
  }
}

bool Matches(const std::string& value, const char* pattern) {
  return std::regex_match(value, std::regex(pattern));
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool IsIp(const std::string& text, int family) {
  unsigned char address[16];
  return inet_pton(family, text.c_str(), address) == 1;
}

// Process sets for a job of 4 ranks, as the README documents them; the canonical spelling.
std::optional<std::string> Sets(const std::string& value) {
  std::string compact;
  for (char c : value) {
    if (c != ' ' && c != '\t') compact += c;
  }
  if (!compact.empty() && compact.back() == ';') compact.pop_back();
  if (compact.empty())
    return value.find(';') == std::string::npos ? std::optional<std::string>("") : std::nullopt;
  if (!Matches(compact, "[0-9]{1,9}(,[0-9]{1,9})*(;[0-9]{1,9}(,[0-9]{1,9})*)*")) return {};
  std::vector<std::set<int>> sets(1);
  std::string number;
  for (char c : compact + ";") {
    if (c >= '0' && c <= '9') {
      number += c;
      continue;
    }
    const int rank = std::stoi(number);
    number.clear();
    if (rank >= 4 || !sets.back().insert(rank).second) return {};  // out of range, or twice
    if (c == ';') sets.emplace_back();
  }
  sets.pop_back();
  std::string canonical;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (sets[i].size() == 4 || std::count(sets.begin(), sets.begin() + i, sets[i]) > 0) return {};
    for (int rank : sets[i]) canonical += std::to_string(rank) + ",";
    canonical.back() = ';';
  }
  canonical.pop_back();
  return canonical;
}

// The documented meaning of `value` for `var`: a plain spelling of it, or nothing when the
// table's grammar refuses it.
std::optional<std::string> Documented(const ConfigVar& var, const std::string& value) {
  switch (ValueKindOf(var)) {
    case ValueKind::kInteger: {
      if (!Matches(value, "[0-9]{1,18}")) return {};
      const long long v = std::stoll(value);
      if (v < var.lo || v > var.hi) return {};
      return std::to_string(v);
    }
    case ValueKind::kNumber: {
      if (!Matches(value, "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?")) return {};
      const double v = std::strtod(value.c_str(), nullptr);
      if (!std::isfinite(v) || v < var.lo || v > var.hi) return {};
      char text[32];
      std::snprintf(text, sizeof(text), "%.17g", v);
      return std::string(text);
    }
    case ValueKind::kBytes: {
      std::smatch m;
      static const std::regex bytes("([0-9]{1,15})(|b|k|m|g|kb|mb|gb|kib|mib|gib)");
      const std::string lower = Lower(value);
      if (!std::regex_match(lower, m, bytes)) return {};
      const std::string unit = m[2].str();
      const int shift = unit.empty() || unit == "b" ? 0
                        : unit[0] == 'k'            ? 10
                        : unit[0] == 'm'            ? 20
                                                    : 30;
      const long double v = std::stold(m[1].str()) * std::pow(2.0L, shift);
      if (v < var.lo || v > var.hi) return {};
      return std::to_string(static_cast<long long>(v));
    }
    case ValueKind::kBool:
      if (value == "0" || value == "1") return value;
      return {};
    case ValueKind::kChoice:
      for (const char* choice : var.choices) {
        if (Lower(value) == choice) return std::string(choice);  // any case
      }
      if (std::string(var.name) == "KOLO_HIERARCHICAL" && (value == "0" || value == "1")) {
        return std::string(value == "1" ? "on" : "off");  // Horovod's switch values
      }
      return {};
    case ValueKind::kText:
      if (var.hi > 0 && value.size() > var.hi) return {};
      return value;
    case ValueKind::kIp:
      if (value.empty()) return value;  // unset
      if (value == "0.0.0.0" || !(IsIp(value, AF_INET) || IsIp(value, AF_INET6))) return {};
      if (IsIp(value, AF_INET6) && value.find_first_not_of(":0") == std::string::npos) return {};
      return value;
    case ValueKind::kHostPort: {
      const size_t colon = value.rfind(':');
      if (colon == std::string::npos) return {};
      std::string host = value.substr(0, colon);
      const std::string port = value.substr(colon + 1);
      const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
      if (bracketed) host = host.substr(1, host.size() - 2);
      const bool host_ok = bracketed ? IsIp(host, AF_INET6)
                                     : IsIp(host, AF_INET) || IsIp(host, AF_INET6) ||
                                           Matches(host, "[A-Za-z0-9_][A-Za-z0-9._-]{0,252}");
      if (!host_ok || !Matches(port, "[0-9]{1,5}") || std::stoi(port) < 1 ||
          std::stoi(port) > 65535) {
        return {};
      }
      return value;
    }
    case ValueKind::kSets:
      return Sets(value);
    case ValueKind::kSecret:
      if (!Matches(value, "([0-9a-fA-F]{2})+") || value.size() < var.lo) return {};
      return value;
  }
  return {};
}

// Values that make an otherwise valid job, so that the row's value is the only question.
std::map<std::string, std::string> BaseEnvironment(const std::string& name) {
  const std::pair<const char*, const char*> controller = {"KOLO_CONTROLLER", "127.0.0.1:1"};
  if (name == "KOLO_RANK") return {{"KOLO_SIZE", "1048576"}, controller};
  if (name == "KOLO_SIZE") return {controller};
  if (name == "KOLO_LOCAL_RANK") {
    return {{"KOLO_SIZE", "1048576"}, {"KOLO_LOCAL_SIZE", "1048576"}, controller};
  }
  if (name == "KOLO_LOCAL_SIZE") return {{"KOLO_SIZE", "1048576"}, controller};
  if (name == "KOLO_CONTROLLER_PORT") return {{"MASTER_ADDR", "127.0.0.1"}};
  if (name == "KOLO_PROCESS_SETS") return {{"KOLO_SIZE", "4"}, controller};
  return {};
}

// What every row's field holds, so that a value with a side effect elsewhere shows too.
std::string Fingerprint(const Options& options) {
  std::string text;
  for (const ConfigVar& var : kolo::ConfigTable()) {
    text += std::string(var.name) + "=" + var.value_text(options) + "\n";
  }
  return text + "controller=" + options.controller_address + "\nsecret=" + options.secret;
}

std::vector<std::string> HostileValues(const ConfigVar& var) {
  std::vector<std::string> values = {
      // hex, hex floats, octal-looking, signs, spaces
      "0x10", "0X1F", "0x1p-1", "010", "+5", "-1", "-0", "-0.5", " 5", "5 ", "\t5", "5\n", " ",
      // empty, huge, not a number
      "", "99999999999999999999", "1e999", "1e308", "NaN", "nan", "inf", "-inf", "Infinity",
      // trailing garbage and near misses of numbers
      "5abc", "5s", "30sec", "1.5.2", "1,5", "5.", ".5", "1e3", "1E-1", "1e", "e3", ".", "0.0",
      // switches in other spellings
      "0", "1", "2", "true", "TRUE", "false", "yes", "no", "on", "off", "On",
      // byte sizes
      "64m", "64 M", "64MB", "1.5G", "4G", "5G", "64Q", "1KiB",
      // addresses
      "not-an-ip", "0.0.0.0", "::", "0::0", "127.0.0.1", "::1", "[::1]", "1.2.3", "127.0.0.1 ",
      "fe80::1%eth0", "256.1.1.1",
      // host:port
      "host:80", "host:0x50", "host: 80", " host:80", "host:80 ", ":80", "host:", "host:0",
      "[::1]:80", "::1:80", "host:99999", "ho st:80", "-host:80", "h:1:2",
      // process sets
      "0;0;1;0,1", "0,1;1,0", "0,,1", "0;;1", ";", ";;", "0,1,2,3", "0, 1; 2, 3", "0,1;2,3;", "1,1",
      "3,2", "0;4", "0,-1",
      // text and secrets
      std::string(300, 'a'), std::string(1 << 20, 'z'), "00112233445566778899aabbccddeeff",
      "00112233445566778899AABBCCDDEEFF", std::string(31, 'a'), std::string(64, 'g')};
  for (const char* choice : var.choices) {  // wrong case, padded
    std::string upper = choice;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    values.push_back(upper);
    values.push_back(std::string(choice) + " ");
    values.push_back(std::string(" ") + choice);
  }
  return values;
}

struct Tally {
  int values = 0;
  int wrongly_accepted = 0;  // the grammar refuses it, kolo took it
  int wrong_meaning = 0;     // taken, with a meaning other than the documented one
  int wrongly_refused = 0;   // the grammar accepts it, kolo refused it
  int unnamed = 0;           // refused without naming the variable, or not as InvalidArgument
};

}  // namespace

TEST_CASE(
    "Every config variable takes a hostile value with its documented meaning or refuses it "
    "by name",
    "[core][config][options][fault]") {
  Tally tally;
  for (const ConfigVar& var : kolo::ConfigTable()) {
    std::vector<std::string> names = {var.name};
    names.insert(names.end(), var.aliases.begin(), var.aliases.end());
    for (const std::string& name : names) {
      for (const std::string& value : HostileValues(var)) {
        INFO(name << "='" << value.substr(0, 40) << (value.size() > 40 ? "...'" : "'"));
        std::map<std::string, std::string> env = BaseEnvironment(var.name);
        env[name] = value;
        const kolo::StatusOr<Options> got = Options::FromMap(env);
        const std::optional<std::string> documented = Documented(var, value);
        ++tally.values;
        if (!got.ok()) {
          INFO(got.status().ToString());
          const bool named = got.status().code() == kolo::StatusCode::kInvalidArgument &&
                             got.status().message().find(name) != std::string::npos;
          tally.unnamed += named ? 0 : 1;
          tally.wrongly_refused += documented ? 1 : 0;
          CHECK(named);
          CHECK_FALSE(documented.has_value());
          continue;
        }
        if (!documented) {
          ++tally.wrongly_accepted;
          FAIL_CHECK("accepted what the table's grammar refuses");
          continue;
        }
        env[name] = *documented;
        const kolo::StatusOr<Options> plain = Options::FromMap(env);
        INFO("documented as '" << *documented << "'");
        REQUIRE(plain.ok());
        if (Fingerprint(*got) != Fingerprint(*plain)) {
          ++tally.wrong_meaning;
          CHECK(Fingerprint(*got) == Fingerprint(*plain));
        }
        if (ValueKindOf(var) == ValueKind::kSecret) CHECK(got->secret == value);
      }
    }
  }
  std::cout << "config_hostile: " << tally.values << " values; wrongly accepted "
            << tally.wrongly_accepted << ", accepted with another meaning " << tally.wrong_meaning
            << ", wrongly refused " << tally.wrongly_refused << ", refused without the name "
            << tally.unnamed << std::endl;  // flushed: forks in later tests must not repeat it
  CHECK(tally.values > 5000);
}

TEST_CASE("The issue's hostile values are refused naming the variable", "[core][config][options]") {
  const std::map<std::string, std::string> expected = {
      {"0x10", "KOLO_TIMEOUT_SECONDS='0x10' is invalid: expected a number in [0.1, 86400]"},
      {"0x1p-1", "KOLO_TIMEOUT_SECONDS='0x1p-1' is invalid: expected a number in [0.1, 86400]"},
      {" 5", "KOLO_TIMEOUT_SECONDS=' 5' is invalid: expected a number in [0.1, 86400]"}};
  for (const auto& [value, message] : expected) {
    auto options = Options::FromMap({{"KOLO_TIMEOUT_SECONDS", value}});
    REQUIRE_FALSE(options.ok());
    CHECK(options.status().message() == message);
  }
  for (const char* name : {"KOLO_AUTOTUNE", "KOLO_FAST_PATH", "HOROVOD_AUTOTUNE"}) {
    for (const char* value : {"true", "yes", ""}) {
      auto options = Options::FromMap({{name, value}});
      REQUIRE_FALSE(options.ok());
      CHECK(options.status().message() ==
            std::string(name) + "='" + value + "' is invalid: expected 0 or 1");
    }
  }
  auto sets = Options::FromMap(
      {{"KOLO_SIZE", "2"}, {"KOLO_CONTROLLER", "127.0.0.1:1"}, {"KOLO_PROCESS_SETS", "0;0;1;0,1"}});
  REQUIRE_FALSE(sets.ok());
  CHECK(sets.status().message() ==
        "KOLO_PROCESS_SETS='0;0;1;0,1' is invalid: set 2: a process set with ranks [0] exists "
        "already (set 1)");
  auto global = Options::FromMap(
      {{"KOLO_SIZE", "2"}, {"KOLO_CONTROLLER", "127.0.0.1:1"}, {"KOLO_PROCESS_SETS", "0;1;0,1"}});
  REQUIRE_FALSE(global.ok());
  CHECK(global.status().message() ==
        "KOLO_PROCESS_SETS='0;1;0,1' is invalid: set 3: a process set with ranks [0, 1] exists "
        "already (the global set)");
  Options by_hand;  // init(Options) checks the same
  by_hand.size = 2;
  by_hand.controller_address = "127.0.0.1:1";
  by_hand.process_sets = "1,0";
  CHECK_THAT(by_hand.Validate().message(), Catch::Contains("(the global set)"));
  auto address = Options::FromMap({{"KOLO_DATA_ADDR", "not-an-ip"}});
  REQUIRE_FALSE(address.ok());
  CHECK(address.status().message() ==
        "KOLO_DATA_ADDR='not-an-ip' is invalid: expected an IPv4 or IPv6 address of this host "
        "(such as 10.0.0.5 or fd00::5), not 0.0.0.0 or ::");
}
