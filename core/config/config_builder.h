// The builder of the config table's rows (core/config/config_table.cc): Row turns a kind of
// value (Integer, Number, Bool, ...), a field of Options, a range and a default into a ConfigVar
// whose printed default and range, parser and range check all derive from them. Only the
// table's one-time construction uses it; the rows it makes are immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/config/config_table.h"
#include "core/config/config_values.h"
#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo {
namespace config_internal {

// Whole numbers print without a fraction or an exponent ("86400", not "86400.000000").
std::string NumberText(double v);
// In the largest binary unit that divides it: "64M", "4G", "4097".
std::string ByteText(int64_t bytes);
std::string Joined(const std::vector<const char*>& words, const char* separator);
// A field of Options built by hand, outside its row's range.
Status BadField(const char* name, const std::string& value, const std::string& want);
std::string Interval(const std::string& lo, const std::string& hi);

// Builds one typed row: a kind method (Integer, Number, …) says where the value goes, its
// range and its default, and derives the printed texts and the parse and check functions from
// them; the rest name and explain the variable.
class Row {
 public:
  explicit Row(const char* name, std::vector<const char*> aliases = {}) {
    var_.name = name;
    var_.aliases = std::move(aliases);
    var_.set_default = [](Options*) {};
    var_.check = [](const Options&) { return Status::Ok(); };
    var_.value_text = [](const Options&) { return std::string(); };
  }

  template <typename T>  // int or int64_t
  Row& Integer(T Options::*field, int64_t lo, int64_t hi, T def, const char* unit = nullptr) {
    Numeric(ConfigKind::kInteger, lo, hi, std::to_string(def), std::to_string(lo),
            std::to_string(hi), unit);
    var_.expected = IntegerExpected(lo, hi);
    var_.apply = [field, lo, hi](const std::string& source, const std::string& value,
                                 Options* options) {
      StatusOr<int64_t> v = ParseIntegerValue(source, value, lo, hi);
      if (!v.ok()) return v.status();
      options->*field = static_cast<T>(*v);
      return Status::Ok();
    };
    var_.set_default = [field, def](Options* options) { options->*field = def; };
    var_.check = [name = var_.name, field, lo, hi, want = var_.expected](const Options& options) {
      const T v = options.*field;
      return v >= lo && v <= hi ? Status::Ok() : BadField(name, std::to_string(v), want);
    };
    var_.value_text = [field](const Options& options) { return std::to_string(options.*field); };
    return *this;
  }

  // An integer that may be left unset (-1 in the field; Unset says what then happens).
  Row& OptionalInteger(int Options::*field, int64_t lo, int64_t hi);

  Row& Number(double Options::*field, double lo, double hi, double def, const char* unit);

  Row& ByteSize(int64_t Options::*field, int64_t lo, int64_t hi, int64_t def);

  // Exactly "1" or "0".
  Row& Bool(bool Options::*field, bool def);

  // One of `choices` in any case, kept as the listed text.
  Row& Choice(std::string Options::*field, std::vector<const char*> choices, const char* def);

  // One of `names`, stored as the enum value at its index.
  template <typename E, size_t N>
  Row& Enum(E Options::*field, const char* const (&names)[N], E def) {
    SetChoices(std::vector<const char*>(names, names + N), names[static_cast<size_t>(def)]);
    var_.apply = [field, choices = var_.choices](const std::string& source,
                                                 const std::string& value, Options* options) {
      StatusOr<size_t> index = ParseChoiceValue(source, value, choices);
      if (!index.ok()) return index.status();
      options->*field = static_cast<E>(*index);
      return Status::Ok();
    };
    var_.set_default = [field, def](Options* options) { options->*field = def; };
    var_.check = [name = var_.name, field, want = var_.expected](const Options& options) {
      const auto v = static_cast<size_t>(options.*field);
      return v < N ? Status::Ok() : BadField(name, std::to_string(v), want);
    };
    var_.value_text = [field, &names](const Options& options) {
      const auto v = static_cast<size_t>(options.*field);
      return v < N ? std::string(names[v]) : std::to_string(v);
    };
    return *this;
  }

  // After Enum: "1" and "0" (a Horovod alias's switch values) mean `on` and `off` too.
  template <typename E>
  Row& SwitchValues(E Options::*field, E on, E off) {
    var_.expected += std::string(", or 1 (") + var_.choices[static_cast<size_t>(on)] + ") or 0 (" +
                     var_.choices[static_cast<size_t>(off)] + ")";
    var_.apply = [field, on, off, choices = var_.choices, want = var_.expected](
                     const std::string& source, const std::string& value, Options* options) {
      size_t index = 0;
      if (value == "1" || value == "0") {
        options->*field = value == "1" ? on : off;
      } else if (MatchChoice(value, choices, &index)) {
        options->*field = static_cast<E>(index);
      } else {
        return InvalidConfigValue(source, value, want);
      }
      return Status::Ok();
    };
    return *this;
  }

  // Free text (`what`: "file path", …), at most `max_bytes` bytes when that is not 0; the
  // default is empty, printed as Unset's text.
  Row& Text(std::string Options::*field, const char* what, size_t max_bytes = 0);

  Row& HostPort(std::string Options::*field);

  // An IP address peers can dial; empty: unset (Unset says what then).
  Row& IpAddress(std::string Options::*field);

  // Process sets ("0,1;2,3"), checked as add_process_set() checks each; the ranks' range and
  // the global set once the job's size is known (Options::Validate).
  Row& RankLists(std::string Options::*field);

  // Checked only: core/config/launcher_env composes the port into the controller address.
  Row& Port();

  // Hex digits in pairs, at least `min_digits`. The value never appears in a message, not
  // even when it is malformed.
  Row& Secret(std::string Options::*field, size_t min_digits);

  // Where the value comes from while the variable is unset; printed as the default, followed
  // by ", else <default>" when the row has one.
  Row& Unset(const char* text);

  Row& Help(const char* text);

  operator ConfigVar() const { return var_; }  // NOLINT: rows convert where the table lists them

 private:
  // A numeric kind: its range [lo, hi] as printed, with `unit` after it when not null.
  void Numeric(ConfigKind kind, double lo, double hi, std::string def, const std::string& lo_text,
               const std::string& hi_text, const char* unit);
  // A string field that keeps the text it was given (the checked kinds and free text).
  void KeepsText(std::string Options::*field);

  void SetChoices(std::vector<const char*> choices, const char* def);

  ConfigVar var_;
};

}  // namespace config_internal
}  // namespace kolo
