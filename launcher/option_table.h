// OptionTable: every option kolorun takes, kolo's own and all of Horovod 0.28.1's horovodrun
// options, each with every spelling, the number of values it takes and where `kolorun --help`
// lists it. ResolveOption turns one command-line word into an option the way horovodrun's
// argparse does. Called by ParseLaunchOptions and UsageText; immutable tables, pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::launcher {

struct OptionSpec {
  // What the option sets: horovodrun's argparse `dest` where horovodrun has the option (both
  // spellings of --[no-]autotune share "autotune"; --gloo, --mpi and --jsrun share
  // "controller"), else kolo's own name ("launch_cmd").
  const char* dest;
  std::vector<const char*> horovod;  // horovodrun's spellings (empty: kolo's own option)
  std::vector<const char*> kolo;     // kolo's other spellings of the same option
  int values;                        // words taken after it: 0, 1 or 2
  // values == 0: what the flag stores under `dest` ("1", "0", "gloo"); else the value's name in
  // --help ("N", "FILE").
  const char* flag_value;
  const char* group;    // horovodrun's argument group; nullptr: listed with kolo's own options
  const char* help;     // what kolo does with it, for --help and the README table
  bool hidden = false;  // argparse.SUPPRESS in horovodrun: accepted, not listed
};

// kolo's own options first, then horovodrun's in the order of its parser.
const std::vector<OptionSpec>& OptionTable();

// horovodrun's argument groups, in the order its --help prints them ("" is its ungrouped
// options).
const std::vector<const char*>& HorovodrunGroups();

struct ResolvedOption {
  const OptionSpec* spec = nullptr;
  std::string spelling;  // the option's own spelling, for messages ("--fusion-threshold-mb")
  std::optional<std::string> value;  // given in the same word: --opt=VALUE, -p22, -Hhost:2
};

// Resolves `word` (which starts with '-') as argparse does for horovodrun: an exact spelling;
// SPELLING=VALUE; a one-letter option with its value attached (-p2222); or a unique prefix of
// a --long spelling (--fusion-thr 32). InvalidArgument "unknown option '...'", or naming the
// candidates of an ambiguous prefix, or for a value given to a flag.
StatusOr<ResolvedOption> ResolveOption(const std::string& word);

// The horovodrun groups of `kolorun --help`: each group, then each listed option's spellings
// and what kolo does with it.
std::string FormatHorovodrunGroups();

}  // namespace kolo::launcher
