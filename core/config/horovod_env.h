// Horovod's environment variables: every one Horovod 0.28.1 reads (horovod/common and
// horovod/runner; the list is tests/core/data/horovod_0.28.1_variables.txt) is an alias of a
// config table row, mapped onto kolo's options, warned about once at init (naming it and why
// kolo ignores it), or refused when its value asks for what kolo cannot do (the message says
// what kolo supports). Options::FromMap calls ApplyHorovodVariables; `kolorun --help-env` and the
// README print HorovodVariablesMarkdownRows(). Pure functions over the environment map; the
// table is immutable; safe from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo {

enum class HorovodHandling {
  kAlias,    // a config table row reads it under its KOLO_ name's grammar and meaning
  kMapped,   // translated onto kolo's options or checked against them
  kWarned,   // kolo has nothing it sets: one warning at init, unless quiet (see `values`)
  kRefused,  // set at all, it asks for what kolo cannot do: init() fails saying what to do
};

struct HorovodVariable {
  const char* name;
  HorovodHandling handling;
  // kMapped: what kolo makes of it, in brief; kWarned: why kolo ignores it; kRefused (and a
  // kMapped value outside `values`): what kolo supports instead.
  const char* detail;
  // kWarned: the values (any case) that ask for what kolo does anyway: accepted without a
  // warning. kMapped without `map`: the values accepted (any case); any other is refused.
  std::vector<const char*> values;
  // kMapped: applies `value` to `options`, or refuses it naming the variable.
  Status (*map)(const HorovodVariable& self, const std::string& value, Options* options) = nullptr;
  // kWarned: also quiet when this says so (kolorun exported it; it agrees with kolo's choice).
  bool (*quiet_when)(const std::string& value, const Options& options) = nullptr;
  // map == the identity check: the resolved field its value must equal.
  int Options::*identity = nullptr;
  bool secret = false;  // its value is never quoted
};

// Every Horovod variable that is not a config table alias, in the order they apply.
const std::vector<HorovodVariable>& HorovodVariables();

// Horovod's names among the config table's aliases (HOROVOD_FUSION_THRESHOLD, ...).
std::vector<std::string> HorovodAliasNames();

// Applies the Horovod variables of `env` to `options`, whose table rows and identity (rank,
// size, local rank and size) are already read: maps the mapped ones, appends one warning per
// warned one to options->environment_warnings, and fails naming the variable and what kolo
// supports on a refused one or an impossible value (HOROVOD_CONTROLLER=mpi, HOROVOD_RANK
// differing from kolo's rank, ...). A variable set to "" counts as unset.
Status ApplyHorovodVariables(const std::map<std::string, std::string>& env, Options* options);

// Whether `name` is one of HorovodVariables() (so that it is no near miss of a table name).
bool IsHandledHorovodVariable(const std::string& name);

// The short markdown table of `kolorun --help-env` and the README: one row per handling,
// naming its variables.
std::vector<std::string> HorovodVariablesMarkdownRows();

}  // namespace kolo
