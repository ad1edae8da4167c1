// ConfigFile: horovodrun's --config-file, a YAML file of Horovod's runtime settings, read into
// HorovodrunSettings by the keys Horovod's runner/common/util/config_parser.py reads
// (`controller`, `params.fusion_threshold_mb`, `autotune.enabled`, ...). Only the small part of
// YAML such files use is read: top-level `key: value` and `section:` lines, indented
// `key: value` lines under a section, plain, 'single'- and "double"-quoted scalars, `#`
// comments, YAML 1.1 booleans. A key kolo does not know is an error naming it (Horovod ignores
// it). Pure functions, but ReadConfigFile reads the file; called by ParseLaunchOptions.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"
#include "launcher/horovodrun_options.h"

namespace kolo::launcher {

// One `key: value` of the file; `key` is "section.key" inside a section.
struct YamlEntry {
  std::string key;
  std::string value;  // the scalar, unquoted; empty for null, ~ or nothing
  bool is_null = false;
  int line = 0;
};

// Parses `text`; `file` names it in errors ("job.yaml:4: ..."). InvalidArgument for what is
// not the subset above (lists, flow style, tabs, a third level).
StatusOr<std::vector<YamlEntry>> ParseYamlSubset(const std::string& text, const std::string& file);

// The settings `entries` make, by dest; null values are left out, as Horovod leaves them.
// InvalidArgument naming file:line and the key it does not know, or a boolean key whose value
// is not a YAML boolean.
StatusOr<HorovodrunSettings> ConfigSettings(const std::vector<YamlEntry>& entries,
                                            const std::string& file);

// Reads, parses and maps the file at `path`.
StatusOr<HorovodrunSettings> ReadConfigFile(const std::string& path);

}  // namespace kolo::launcher
