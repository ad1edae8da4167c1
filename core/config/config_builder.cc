// The config table's row builder (core/config/config_builder.h): the helpers and the kinds
// that are not templates.
#include "core/config/config_builder.h"

#include <cmath>
#include <cstdio>
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

// A field of Options built by hand, outside its row's range.
Status BadField(const char* name, const std::string& value, const std::string& want) {
  return InvalidArgument(std::string(name) + "=" + value + " is invalid: expected " + want);
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
  Numeric(ConfigKind::kNumber, lo, hi, NumberText(def), NumberText(lo), NumberText(hi), unit);
  var_.expected = NumberExpected(lo, hi);
  var_.apply = [field, lo, hi](const std::string& source, const std::string& value,
                               Options* options) {
    StatusOr<double> v = ParseNumberValue(source, value, lo, hi);
    if (!v.ok()) return v.status();
    options->*field = *v;
    return Status::Ok();
  };
  var_.set_default = [field, def](Options* options) { options->*field = def; };
  var_.check = [name = var_.name, field, lo, hi, want = var_.expected](const Options& options) {
    const double v = options.*field;  // NaN fails both comparisons
    return v >= lo && v <= hi ? Status::Ok() : BadField(name, NumberText(v), want);
  };
  var_.value_text = [field](const Options& options) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", options.*field);
    return std::string(text);
  };
  return *this;
}

Row& Row::ByteSize(int64_t Options::*field, int64_t lo, int64_t hi, int64_t def) {
  Numeric(ConfigKind::kByteSize, static_cast<double>(lo), static_cast<double>(hi), ByteText(def),
          ByteText(lo), ByteText(hi), "bytes");
  var_.expected = ByteSizeExpected(lo, hi);
  var_.apply = [field, lo, hi](const std::string& source, const std::string& value,
                               Options* options) {
    StatusOr<int64_t> bytes = ParseByteSizeValue(source, value, lo, hi);
    if (!bytes.ok()) return bytes.status();
    options->*field = *bytes;
    return Status::Ok();
  };
  var_.set_default = [field, def](Options* options) { options->*field = def; };
  var_.check = [name = var_.name, field, lo, hi, want = var_.expected](const Options& options) {
    const int64_t v = options.*field;
    return v >= lo && v <= hi ? Status::Ok() : BadField(name, std::to_string(v), want);
  };
  var_.value_text = [field](const Options& options) { return std::to_string(options.*field); };
  return *this;
}

Row& Row::Bool(bool Options::*field, bool def) {
  var_.kind = ConfigKind::kBool;
  var_.default_text = def ? "1" : "0";
  var_.range = "0|1";
  var_.expected = kBoolExpected;
  var_.apply = [field](const std::string& source, const std::string& value, Options* options) {
    StatusOr<bool> v = ParseBoolValue(source, value);
    if (!v.ok()) return v.status();
    options->*field = *v;
    return Status::Ok();
  };
  var_.set_default = [field, def](Options* options) { options->*field = def; };
  var_.value_text = [field](const Options& options) {
    return std::string(options.*field ? "1" : "0");
  };
  return *this;
}

Row& Row::Choice(std::string Options::*field, std::vector<const char*> choices, const char* def) {
  SetChoices(std::move(choices), def);
  var_.apply = [field, names = var_.choices](const std::string& source, const std::string& value,
                                             Options* options) {
    StatusOr<size_t> index = ParseChoiceValue(source, value, names);
    if (!index.ok()) return index.status();
    options->*field = names[*index];  // HOROVOD_LOG_LEVEL=INFO keeps "info"
    return Status::Ok();
  };
  var_.set_default = [field, def](Options* options) { options->*field = def; };
  var_.check = [name = var_.name, field, names = var_.choices,
                want = var_.expected](const Options& options) {
    for (const char* choice : names) {
      if (options.*field == choice) return Status::Ok();
    }
    return BadField(name, "'" + options.*field + "'", want);
  };
  var_.value_text = [field](const Options& options) { return options.*field; };
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
  KeepsText(field);
  var_.apply = [field, max_bytes, want = var_.expected](
                   const std::string& source, const std::string& value, Options* options) {
    if (max_bytes > 0 && value.size() > max_bytes) {
      return InvalidConfigValue(source, value.substr(0, 32) + "...", want);
    }
    options->*field = value;
    return Status::Ok();
  };
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
  var_.expected = kHostPortExpected;
  KeepsText(field);
  var_.apply = [field](const std::string& source, const std::string& value, Options* options) {
    KOLO_RETURN_IF_ERROR(CheckHostPortValue(source, value));
    options->*field = value;
    return Status::Ok();
  };
  return *this;
}

Row& Row::IpAddress(std::string Options::*field) {
  var_.kind = ConfigKind::kIpAddress;
  var_.range = "IP address";
  var_.expected = kIpAddressExpected;
  KeepsText(field);
  var_.apply = [field](const std::string& source, const std::string& value, Options* options) {
    if (!value.empty()) KOLO_RETURN_IF_ERROR(CheckIpAddressValue(source, value));
    options->*field = value;
    return Status::Ok();
  };
  var_.check = [name = var_.name, field](const Options& options) {
    const std::string& value = options.*field;
    return value.empty() ? Status::Ok() : CheckIpAddressValue(name, value);
  };
  return *this;
}

Row& Row::RankLists(std::string Options::*field) {
  var_.kind = ConfigKind::kRankLists;
  var_.range = "rank lists";
  var_.expected = kRankListsExpected;
  KeepsText(field);
  var_.apply = [field](const std::string& source, const std::string& value, Options* options) {
    KOLO_RETURN_IF_ERROR(ParseRankListsValue(source, value, 0).status());
    options->*field = value;
    return Status::Ok();
  };
  var_.check = [name = var_.name, field](const Options& options) {
    return ParseRankListsValue(name, options.*field, options.size).status();
  };
  var_.value_text = [name = var_.name, field](const Options& options) {
    StatusOr<std::vector<std::vector<int>>> sets = ParseRankListsValue(name, options.*field, 0);
    if (!sets.ok()) return options.*field;
    std::string text;  // "0,1;2,3": the sets as parsed, ranks ascending
    for (const std::vector<int>& set : *sets) {
      text += text.empty() ? "" : ";";
      for (size_t i = 0; i < set.size(); ++i) text += (i ? "," : "") + std::to_string(set[i]);
    }
    return text;
  };
  return *this;
}

Row& Row::Port() {
  Numeric(ConfigKind::kPort, 1, 65535, "", "1", "65535", nullptr);
  var_.expected = IntegerExpected(1, 65535);
  var_.apply = [](const std::string& source, const std::string& value, Options*) {
    return ParseIntegerValue(source, value, 1, 65535).status();
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
  var_.value_text = [](const Options&) { return std::string("(not shown)"); };
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
                  const std::string& lo_text, const std::string& hi_text, const char* unit) {
  var_.kind = kind;
  var_.lo = lo;
  var_.hi = hi;
  var_.default_text = std::move(def);
  var_.range = Interval(lo_text, hi_text) + (unit != nullptr ? std::string(" ") + unit : "");
}

void Row::KeepsText(std::string Options::*field) {
  var_.set_default = [field](Options* options) { (options->*field).clear(); };
  var_.value_text = [field](const Options& options) { return options.*field; };
}

void Row::SetChoices(std::vector<const char*> choices, const char* def) {
  var_.kind = ConfigKind::kChoice;
  var_.choices = std::move(choices);
  var_.default_text = def;
  var_.range = Joined(var_.choices, "|");
  var_.expected = ChoiceExpected(var_.choices);
}

}  // namespace config_internal
}  // namespace kolo
