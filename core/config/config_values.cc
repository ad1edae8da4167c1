// The parsers of configuration values (core/config/config_values.h).
#include "core/config/config_values.h"

#include <arpa/inet.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/process_sets.h"

namespace kolo {
namespace {

constexpr int kUnknownSizeRanks = 1 << 20;  // the config table's largest job

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

bool AllDigits(const std::string& text, size_t from, size_t to) {
  if (from >= to) return false;
  for (size_t i = from; i < to; ++i) {
    if (!IsDigit(text[i])) return false;
  }
  return true;
}

// Whole numbers without a fraction ("86400"), others as the shortest text that reads back.
std::string BoundText(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  std::ostringstream out;
  out << v;
  return out.str();
}

// In the largest binary unit that divides it: "64M", "4G", "4097".
std::string BytesText(int64_t bytes) {
  const char* units[] = {"", "K", "M", "G"};
  int unit = 3;
  while (unit > 0 && (bytes == 0 || bytes % (int64_t{1} << (10 * unit)) != 0)) --unit;
  return std::to_string(bytes >> (10 * unit)) + units[unit];
}

std::string Interval(const std::string& lo, const std::string& hi) {
  return "[" + lo + ", " + hi + "]";
}

std::string RanksText(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

// A host name's characters (RFC 1123 letters, digits, '-', '.', and '_' that container
// platforms use).
bool IsHostName(const std::string& host) {
  if (host.empty() || host.size() > 253 || host.front() == '-' || host.front() == '.') {
    return false;
  }
  return std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
}

bool IsIpLiteral(const std::string& text, int family) {
  unsigned char address[16];
  return inet_pton(family, text.c_str(), address) == 1;
}

// Rank lists' shape: numbers of 1 to 9 digits joined by ',' into sets, sets by ';', at most
// one trailing ';'. `compact` has no spaces.
bool IsRankListsShape(const std::string& compact) {
  std::string body = compact;
  if (!body.empty() && body.back() == ';') body.pop_back();
  if (body.empty()) return compact.empty();
  size_t start = 0;
  while (start <= body.size()) {
    const size_t end = std::min(body.find_first_of(",;", start), body.size());
    if (end - start < 1 || end - start > 9 || !AllDigits(body, start, end)) return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

const char kConfigValueGrammar[] =
    "Values: integers and numbers in decimal (digits, a '.' fraction, an 'e' exponent; no "
    "sign, spaces, hex, inf or nan); byte sizes as an integer with an optional K, M or G; "
    "switches (0|1) as 0 or 1 only; choices as listed, in any case; an empty value is refused "
    "except for text (empty: unset) and KOLO_PROCESS_SETS (empty: none).";

const char kBoolExpected[] = "0 or 1";
const char kIpAddressExpected[] =
    "an IPv4 or IPv6 address of this host (such as 10.0.0.5 or fd00::5), not 0.0.0.0 or ::";
const char kHostPortExpected[] = "host:port with a port in [1, 65535]";
const char kRankListsExpected[] =
    "rank lists such as \"0,1;2,3\" (sets separated by ';', ranks by ',')";

Status InvalidConfigValue(const std::string& name, const std::string& text,
                          const std::string& expected) {
  return InvalidArgument(name + "='" + text + "' is invalid: expected " + expected);
}

std::string IntegerExpected(int64_t lo, int64_t hi) {
  return "an integer in " + Interval(std::to_string(lo), std::to_string(hi));
}

bool ParseDecimalInteger(const std::string& text, int64_t* out) {
  if (!AllDigits(text, 0, text.size())) return false;
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, *out);
  return error == std::errc() && ptr == end;
}

StatusOr<int64_t> ParseIntegerValue(const std::string& name, const std::string& text, int64_t lo,
                                    int64_t hi) {
  int64_t v = 0;
  if (!ParseDecimalInteger(text, &v) || v < lo || v > hi) {
    return InvalidConfigValue(name, text, IntegerExpected(lo, hi));
  }
  return v;
}

std::string NumberExpected(double lo, double hi) {
  return "a number in " + Interval(BoundText(lo), BoundText(hi));
}

bool ParseDecimalNumber(const std::string& text, double* out) {
  // digits [. digits] | . digits, then [e [+-] digits]
  size_t i = 0;
  const size_t n = text.size();
  size_t digits = 0;
  for (; i < n && IsDigit(text[i]); ++i) ++digits;
  if (i < n && text[i] == '.') {
    for (++i; i < n && IsDigit(text[i]); ++i) ++digits;
  }
  if (digits == 0) return false;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    if (!AllDigits(text, i, n)) return false;
    i = n;
  }
  if (i != n) return false;
  // from_chars reads the C locale's '.', whatever LC_NUMERIC the program set.
  auto [ptr, error] = std::from_chars(text.data(), text.data() + n, *out);
  return error == std::errc() && ptr == text.data() + n && std::isfinite(*out);
}

StatusOr<double> ParseNumberValue(const std::string& name, const std::string& text, double lo,
                                  double hi) {
  double v = 0;
  if (!ParseDecimalNumber(text, &v) || v < lo || v > hi) {
    return InvalidConfigValue(name, text, NumberExpected(lo, hi));
  }
  return v;
}

std::string ByteSizeExpected(int64_t lo, int64_t hi) {
  return "a byte size in " + Interval(BytesText(lo), BytesText(hi)) +
         " such as 1048576, 64K, 64M or 1G";
}

StatusOr<int64_t> ParseByteSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && IsDigit(text[digits])) ++digits;
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int64_t scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "K" || unit == "KB" || unit == "KIB") scale = int64_t{1} << 10;
  if (unit == "M" || unit == "MB" || unit == "MIB") scale = int64_t{1} << 20;
  if (unit == "G" || unit == "GB" || unit == "GIB") scale = int64_t{1} << 30;
  if (digits == 0 || digits > 15 || scale == 0) {
    return InvalidArgument("'" + text + "' is not a byte size (such as 4096, 64K, 64M, 1G)");
  }
  const int64_t count = std::stoll(text.substr(0, digits));  // < 10^15: cannot overflow
  if (count > std::numeric_limits<int64_t>::max() / scale) {
    return InvalidArgument("'" + text + "' is too large a byte size");
  }
  return count * scale;
}

StatusOr<int64_t> ParseByteSizeValue(const std::string& name, const std::string& text, int64_t lo,
                                     int64_t hi) {
  StatusOr<int64_t> bytes = ParseByteSize(text);
  if (!bytes.ok() || *bytes < lo || *bytes > hi) {
    return InvalidConfigValue(name, text, ByteSizeExpected(lo, hi));
  }
  return *bytes;
}

StatusOr<bool> ParseBoolValue(const std::string& name, const std::string& text) {
  if (text == "1") return true;
  if (text == "0") return false;
  return InvalidConfigValue(name, text, kBoolExpected);
}

std::string ChoiceExpected(const std::vector<const char*>& choices) {
  std::string text = "one of ";
  for (size_t i = 0; i < choices.size(); ++i) text += (i ? ", " : "") + std::string(choices[i]);
  return text;
}

bool MatchChoice(const std::string& text, const std::vector<const char*>& choices, size_t* index) {
  for (size_t i = 0; i < choices.size(); ++i) {
    if (strcasecmp(text.c_str(), choices[i]) == 0) {
      *index = i;
      return true;
    }
  }
  return false;
}

StatusOr<size_t> ParseChoiceValue(const std::string& name, const std::string& text,
                                  const std::vector<const char*>& choices) {
  size_t index = 0;
  if (!MatchChoice(text, choices, &index)) {
    return InvalidConfigValue(name, text, ChoiceExpected(choices));
  }
  return index;
}

Status CheckIpAddressValue(const std::string& name, const std::string& text) {
  const bool v4 = IsIpLiteral(text, AF_INET);
  const bool v6 = IsIpLiteral(text, AF_INET6);
  // The unspecified addresses: 0.0.0.0, and "::" however written ("0::0", "::0").
  const bool unspecified =
      (v4 && text == "0.0.0.0") || (v6 && text.find_first_not_of(":0") == std::string::npos);
  if ((!v4 && !v6) || unspecified) return InvalidConfigValue(name, text, kIpAddressExpected);
  return Status::Ok();
}

Status CheckHostPortValue(const std::string& name, const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return InvalidConfigValue(name, text, kHostPortExpected);
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (!IsIpLiteral(host, AF_INET6)) return InvalidConfigValue(name, text, kHostPortExpected);
  }
  int64_t port = 0;
  const bool host_ok =
      IsHostName(host) || IsIpLiteral(host, AF_INET) || IsIpLiteral(host, AF_INET6);
  if (!host_ok || !ParseDecimalInteger(text.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return InvalidConfigValue(name, text, kHostPortExpected);
  }
  return Status::Ok();
}

StatusOr<std::vector<std::vector<int>>> ParseRankListsValue(const std::string& name,
                                                            const std::string& text, int size) {
  std::string compact;
  for (char c : text) {
    if (c != ' ' && c != '\t') compact += c;
  }
  if (!IsRankListsShape(compact)) return InvalidConfigValue(name, text, kRankListsExpected);
  StatusOr<std::vector<std::vector<int>>> sets =
      ParseProcessSets(compact, size > 0 ? size : kUnknownSizeRanks);
  if (!sets.ok()) {  // a rank out of range or twice in a set: add_process_set()'s words
    return InvalidArgument(name + "='" + text + "' is invalid: " + sets.status().message());
  }
  for (size_t i = 0; i < sets->size(); ++i) {
    const std::vector<int>& ranks = (*sets)[i];
    std::string same;
    for (size_t j = 0; j < i && same.empty(); ++j) {
      if ((*sets)[j] == ranks) same = "set " + std::to_string(j + 1);
    }
    if (same.empty() && size > 0 && ranks.size() == static_cast<size_t>(size)) {
      same = "the global set";
    }
    if (!same.empty()) {  // add_process_set()'s words for a set that exists already
      return InvalidArgument(name + "='" + text + "' is invalid: set " + std::to_string(i + 1) +
                             ": a process set with ranks " + RanksText(ranks) +
                             " exists already (" + same + ")");
    }
  }
  return sets;
}

}  // namespace kolo
