// The configuration table: every environment variable kolo reads, with its default, accepted
// range and meaning (DESIGN.md §7). Options::FromMap/FromEnvironment parse through it, and
// `kolorun --help-env` prints it. Immutable; safe from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo {

struct ConfigVar {
  const char* name;                  // KOLO_… name; wins over the aliases
  std::vector<const char*> aliases;  // Horovod / torchrun names accepted too, in order
  const char* default_text;
  const char* range;
  const char* help;
  // Parses `value` (from variable `source`) into `options`; the error names `source`.
  Status (*apply)(const std::string& source, const std::string& value, Options* options);
};

const std::vector<ConfigVar>& ConfigTable();

// The table as aligned text for `kolorun --help-env`.
std::string FormatConfigTable();

// Parses a byte size: "1048576", "64K", "64M", "1G" (binary units, any case; also KB/KiB,
// MB/MiB, GB/GiB). Rejects signs, fractions, junk and values that overflow int64.
StatusOr<int64_t> ParseByteSize(const std::string& text);

}  // namespace kolo
