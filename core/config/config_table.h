// The configuration table: every environment variable kolo reads, as one typed row each (name,
// aliases, the Options field, range, default, help; DESIGN.md §7). It is the only place a
// default or a range is written: Options' constructor takes its defaults from it, FromMap
// parses through it, Options::Validate checks ranges with it, and `kolorun --help-env` prints
// it (the README's table is a copy that a test compares). Immutable; safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config/config_values.h"  // ParseByteSize and the other value parsers
#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo {

// What a variable's value is: decides how its text parses (core/config/config_values.h) and
// how its range prints.
enum class ConfigKind {
  kInteger,    // an int field, range [lo, hi]
  kNumber,     // a double field, range [lo, hi], finite
  kByteSize,   // an int64_t field: a byte size ("64M"), range [lo, hi] bytes
  kBool,       // exactly 0 or 1
  kChoice,     // one of `choices`, any case (a string or an enum field)
  kText,       // free text (a path, a name), at most `hi` bytes when hi > 0; empty: unset
  kHostPort,   // host:port with a port in [lo, hi]
  kPort,       // an integer port in [lo, hi], checked only (launcher_env uses it)
  kSecret,     // hex, at least `lo` digits, in pairs; never quoted in a message
  kIpAddress,  // an IPv4 or IPv6 literal peers can dial (not 0.0.0.0 or ::); empty: unset
  kRankLists,  // process sets "0,1;2,3"; empty: none
};

struct ConfigVar {
  const char* name;                  // KOLO_… name; wins over the aliases
  std::vector<const char*> aliases;  // Horovod / torchrun names accepted too, in order
  ConfigKind kind;
  double lo = 0;                     // numeric range (integer, number, byte size, port), or
  double hi = 0;                     //   the length bounds of text and secrets (see kind)
  std::vector<const char*> choices;  // kChoice: the accepted values, in the order printed
  std::string default_text;          // the default as `--help-env` prints it
  std::string range;                 // the range as `--help-env` prints it ("[0, 86400] s")
  std::string expected;              // what a bad value is told ("a number in [0, 86400]")
  const char* help;                  // one or two sentences; no '|' (a markdown cell)
  // Parses `value` (read from variable `source`, the name or an alias) into `options`. The
  // error names `source` and says what was expected.
  std::function<Status(const std::string& source, const std::string& value, Options* options)>
      apply;
  // Sets this row's field of `options` to the default (Options' constructor).
  std::function<void(Options* options)> set_default;
  // Checks this row's field of `options` against the range (Options::Validate; options built
  // by hand). The error names the variable. OK for rows without a field.
  std::function<Status(const Options& options)> check;
  // This row's field of `options` as text that `apply` reads back to the same value (a choice
  // in its listed case, a number with every digit it needs): what a value meant once parsed.
  // Empty for rows without a field; "(not shown)" for a secret.
  std::function<std::string(const Options& options)> value_text;
};

const std::vector<ConfigVar>& ConfigTable();

// The row named `name` (not an alias). Aborts when there is none: a programmer error.
const ConfigVar& FindConfigVar(const std::string& name);

// A default-constructed Options, built once: the defaults of the slices of Options that some
// parts take instead of the whole (e.g. TcpMesh::Config's timeout), for tests that build them
// by hand; the runtime fills them from its Options.
const Options& DefaultOptions();

// Every row's range check over `options`, in table order; the first failure.
Status CheckConfigRanges(const Options& options);

// `kolorun --help-env`: a line of introduction, the table as markdown rows (the README's
// "Environment variables" table is exactly these rows), how launchers' variables are read, the
// grammar of values (kConfigValueGrammar), and the table of Horovod's variables
// (HorovodVariablesMarkdownRows(), also copied into the README).
std::string FormatConfigTable();
// Just the markdown rows of the table: header, separator, one row per variable.
std::vector<std::string> ConfigTableMarkdownRows();

// KOLO_TRANSPORT's names: "auto", "tcp", "shm".
const char* TransportName(Transport transport);
// KOLO_GPU_OPERATIONS's names: "auto", "nccl", "ring".
const char* GpuOperationsName(GpuOperations operations);
// The Transport named `name`; InvalidArgument naming KOLO_TRANSPORT's choices otherwise.
StatusOr<Transport> TransportFromName(const std::string& name);

}  // namespace kolo
