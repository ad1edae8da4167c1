// The config table's row builder (core/config/config_builder.h): the helpers and the kinds
// that are not templates.
#include "core/config/config_builder.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace kolo {
namespace config_internal {

// Whole numbers print without a fraction or an exponent ("86400", not "86400.000000").
std::string NumberText(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  std::ostringstream out;
  out << v;
  return out.str();
}

// In the largest binary unit that divides it: "64M", "4G", "4097".
std::string ByteText(int64_t bytes) {
  const char* units[] = {"", "K", "M", "G"};
  int unit = 3;
  while (unit > 0 && (bytes == 0 || bytes % (int64_t{1} << (10 * unit)) != 0)) --unit;
  return std::to_string(bytes >> (10 * unit)) + units[unit];
}

std::string Joined(const std::vector<const char*>& words, const char* separator) {
  std::string text;
  for (const char* word : words) text += (text.empty() ? "" : separator) + std::string(word);
  return text;
}

Status BadValue(const std::string& source, const std::string& value, const std::string& want) {
  return InvalidArgument(source + "='" + value + "' is invalid: expected " + want);
}

// A field of Options built by hand, outside its row's range.
Status BadField(const char* name, const std::string& value, const std::string& want) {
  return InvalidArgument(std::string(name) + "=" + value + " is invalid: expected " + want);
}

bool ParseInteger(const std::string& value, int64_t lo, int64_t hi, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ParseNumber(const std::string& value, double lo, double hi, double* out) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
    return false;
  }
  *out = v;
  return true;
}

std::string Interval(const std::string& lo, const std::string& hi) {
  return "[" + lo + ", " + hi + "]";
}

Row& Row::OptionalInteger(int Options::*field, int64_t lo, int64_t hi) {
  Integer<int>(field, lo, hi, -1);
  var_.default_text.clear();
  auto check = var_.check;
  var_.check = [field, check](const Options& options) {
    return options.*field == -1 ? Status::Ok() : check(options);
  };
  return *this;
}

Row& Row::Number(double Options::*field, double lo, double hi, double def, const char* unit) {
  Numeric(ConfigKind::kNumber, lo, hi, NumberText(def), NumberText(lo), NumberText(hi), unit,
          "a number in ");
  const std::string want = var_.expected;
  var_.apply = [field, lo, hi, want](const std::string& source, const std::string& value,
                                     Options* options) {
    return ParseNumber(value, lo, hi, &(options->*field)) ? Status::Ok()
                                                          : BadValue(source, value, want);
  };
  var_.set_default = [field, def](Options* options) { options->*field = def; };
  var_.check = [name = var_.name, field, lo, hi, want](const Options& options) {
    const double v = options.*field;  // NaN fails both comparisons
    return v >= lo && v <= hi ? Status::Ok() : BadField(name, NumberText(v), want);
  };
  return *this;
}

Row& Row::ByteSize(int64_t Options::*field, int64_t lo, int64_t hi, int64_t def) {
  Numeric(ConfigKind::kByteSize, static_cast<double>(lo), static_cast<double>(hi), ByteText(def),
          ByteText(lo), ByteText(hi), "bytes", "a byte size in ");
  var_.expected += " such as 1048576, 64K, 64M or 1G";
  const std::string want = var_.expected;
  var_.apply = [field, lo, hi, want](const std::string& source, const std::string& value,
                                     Options* options) {
    StatusOr<int64_t> bytes = ParseByteSize(value);
    if (!bytes.ok() || *bytes < lo || *bytes > hi) return BadValue(source, value, want);
    options->*field = *bytes;
    return Status::Ok();
  };
  var_.set_default = [field, def](Options* options) { options->*field = def; };
  var_.check = [name = var_.name, field, lo, hi, want](const Options& options) {
    const int64_t v = options.*field;
    return v >= lo && v <= hi ? Status::Ok() : BadField(name, std::to_string(v), want);
  };
  return *this;
}

Row& Row::Bool(bool Options::*field, bool def) {
  var_.kind = ConfigKind::kBool;
  var_.default_text = def ? "1" : "0";
  var_.range = "0|1";
  var_.expected = "0 or 1";
  var_.apply = [field, want = var_.expected](const std::string& source, const std::string& value,
                                             Options* options) {
    if (value == "1" || value == "true") {
      options->*field = true;
    } else if (value == "0" || value == "false" || value.empty()) {
      options->*field = false;
    } else {
      return BadValue(source, value, want);
    }
    return Status::Ok();
  };
  var_.set_default = [field, def](Options* options) { options->*field = def; };
  return *this;
}

Row& Row::Choice(std::string Options::*field, std::vector<const char*> choices, const char* def) {
  SetChoices(std::move(choices), def);
  const std::vector<const char*> names = var_.choices;
  var_.apply = [field, names, want = var_.expected](const std::string& source,
                                                    const std::string& value, Options* options) {
    for (const char* name : names) {
      if (value == name) {
        options->*field = value;
        return Status::Ok();
      }
    }
    return BadValue(source, value, want);
  };
  var_.set_default = [field, def](Options* options) { options->*field = def; };
  var_.check = [name = var_.name, field, names, want = var_.expected](const Options& options) {
    for (const char* choice : names) {
      if (options.*field == choice) return Status::Ok();
    }
    return BadField(name, "'" + options.*field + "'", want);
  };
  return *this;
}

Row& Row::Text(std::string Options::*field, const char* what, size_t max_bytes) {
  var_.kind = ConfigKind::kText;
  var_.hi = static_cast<double>(max_bytes);
  var_.range = what;
  var_.expected = "text";
  if (max_bytes > 0) {
    var_.range += ", <= " + std::to_string(max_bytes) + " bytes";
    var_.expected += " of at most " + std::to_string(max_bytes) + " bytes";
  }
  var_.apply = [field, max_bytes, want = var_.expected](
                   const std::string& source, const std::string& value, Options* options) {
    if (max_bytes > 0 && value.size() > max_bytes) {
      return BadValue(source, value.substr(0, 32) + "...", want);
    }
    options->*field = value;
    return Status::Ok();
  };
  var_.set_default = [field](Options* options) { (options->*field).clear(); };
  var_.check = [name = var_.name, field, max_bytes, want = var_.expected](const Options& o) {
    return max_bytes == 0 || (o.*field).size() <= max_bytes
               ? Status::Ok()
               : BadField(name, std::to_string((o.*field).size()) + " bytes", want);
  };
  return *this;
}

Row& Row::HostPort(std::string Options::*field) {
  var_.kind = ConfigKind::kHostPort;
  var_.lo = 1;
  var_.hi = 65535;
  var_.range = "host:port";
  var_.expected = "host:port with a port in [1, 65535]";
  var_.apply = [field, want = var_.expected](const std::string& source, const std::string& value,
                                             Options* options) {
    const size_t colon = value.rfind(':');
    int64_t port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !ParseInteger(value.substr(colon + 1), 1, 65535, &port)) {
      return BadValue(source, value, want);
    }
    options->*field = value;
    return Status::Ok();
  };
  var_.set_default = [field](Options* options) { (options->*field).clear(); };
  return *this;
}

Row& Row::Port() {
  Numeric(ConfigKind::kPort, 1, 65535, "", "1", "65535", nullptr, "an integer in ");
  var_.apply = [want = var_.expected](const std::string& source, const std::string& value,
                                      Options*) {
    int64_t port = 0;
    return ParseInteger(value, 1, 65535, &port) ? Status::Ok() : BadValue(source, value, want);
  };
  return *this;
}

Row& Row::Secret(std::string Options::*field, size_t min_digits) {
  var_.kind = ConfigKind::kSecret;
  var_.lo = static_cast<double>(min_digits);
  var_.range = "hex, >= " + std::to_string(min_digits) + " digits";
  var_.expected = "at least " + std::to_string(min_digits) + " hex digits in pairs";
  var_.apply = [field, min_digits, want = var_.expected](
                   const std::string& source, const std::string& value, Options* options) {
    const size_t bad = value.find_first_not_of("0123456789abcdefABCDEF");
    if (bad != std::string::npos || value.size() % 2 != 0 || value.size() < min_digits) {
      const std::string why = bad != std::string::npos
                                  ? "character " + std::to_string(bad + 1) + " is not a hex digit"
                                  : "got " + std::to_string(value.size()) + " digits";
      return InvalidArgument(source + " is invalid (value not shown): expected " + want + "; " +
                             why);
    }
    options->*field = value;
    return Status::Ok();
  };
  var_.set_default = [field](Options* options) { (options->*field).clear(); };
  return *this;
}

Row& Row::Unset(const char* text) {
  var_.default_text =
      var_.default_text.empty() ? text : std::string(text) + ", else " + var_.default_text;
  return *this;
}

Row& Row::Help(const char* text) {
  var_.help = text;
  return *this;
}

void Row::Numeric(ConfigKind kind, double lo, double hi, std::string def,
                  const std::string& lo_text, const std::string& hi_text, const char* unit,
                  const char* want) {
  var_.kind = kind;
  var_.lo = lo;
  var_.hi = hi;
  var_.default_text = std::move(def);
  var_.range = Interval(lo_text, hi_text) + (unit != nullptr ? std::string(" ") + unit : "");
  var_.expected = want + Interval(lo_text, hi_text);
}

void Row::SetChoices(std::vector<const char*> choices, const char* def) {
  var_.kind = ConfigKind::kChoice;
  var_.choices = std::move(choices);
  var_.default_text = def;
  var_.range = Joined(var_.choices, "|");
  var_.expected = "one of " + Joined(var_.choices, ", ");
}

}  // namespace config_internal
}  // namespace kolo
