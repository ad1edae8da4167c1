// horovodrun's --config-file; see config_file.h.
#include "launcher/config_file.h"

#include <fstream>
#include <sstream>

namespace kolo::launcher {
namespace {

// Horovod's keys (config_parser.set_args_from_config) and the dest each sets.
struct ConfigKey {
  const char* key;
  const char* dest;
  bool boolean = false;
  bool inverted = false;  // stall_check.enabled is --no-stall-check's opposite
};

const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey> keys = {
      {"controller", "controller"},
      {"params.fusion_threshold_mb", "fusion_threshold_mb"},
      {"params.cycle_time_ms", "cycle_time_ms"},
      {"params.cache_capacity", "cache_capacity"},
      {"params.hierarchical_allreduce", "hierarchical_allreduce", true},
      {"params.hierarchical_allgather", "hierarchical_allgather", true},
      {"params.torus_allreduce", "torus_allreduce", true},
      {"autotune.enabled", "autotune", true},
      {"autotune.log_file", "autotune_log_file"},
      {"autotune.warmup_samples", "autotune_warmup_samples"},
      {"autotune.steps_per_sample", "autotune_steps_per_sample"},
      {"autotune.bayes_opt_max_samples", "autotune_bayes_opt_max_samples"},
      {"autotune.gaussian_process_noise", "autotune_gaussian_process_noise"},
      {"timeline.filename", "timeline_filename"},
      {"timeline.mark_cycles", "timeline_mark_cycles", true},
      {"stall_check.enabled", "no_stall_check", true, true},
      {"stall_check.warning_time_seconds", "stall_check_warning_time_seconds"},
      {"stall_check.shutdown_time_seconds", "stall_check_shutdown_time_seconds"},
      {"library_options.mpi_threads_disable", "mpi_threads_disable", true},
      {"library_options.num_nccl_streams", "num_nccl_streams"},
      {"library_options.thread_affinity", "thread_affinity"},
      {"library_options.gloo_timeout_seconds", "gloo_timeout_seconds"},
      {"logging.level", "log_level"},
      {"logging.with_timestamp", "log_with_timestamp", true},
      // Not read by config_parser, but in Horovod's own test config (test/single/data).
      {"logging.hide_timestamp", "log_with_timestamp", true, true},
  };
  return keys;
}

const char* const kSections[] = {"params",      "autotune",        "timeline",
                                 "stall_check", "library_options", "logging"};

bool IsSection(const std::string& name) {
  for (const char* section : kSections) {
    if (name == section) return true;
  }
  return false;
}

std::string KnownKeys() {
  std::string text;
  for (const ConfigKey& key : ConfigKeys())
    text += (text.empty() ? "" : ", ") + std::string(key.key);
  return text;
}

// PyYAML's booleans (YAML 1.1), and 1 and 0 as Python's truth.
StatusOr<bool> YamlBool(const std::string& value, const std::string& where) {
  for (const char* yes : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "1"}) {
    if (value == yes) return true;
  }
  for (const char* no : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "0"}) {
    if (value == no) return false;
  }
  return InvalidArgument(where + " must be true or false, got '" + value + "'");
}

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(' ') - begin + 1);
}

// The scalar after "key:", unquoted and without its comment.
StatusOr<std::string> Scalar(const std::string& raw, const std::string& where, bool* is_null) {
  const std::string text = Trim(raw);
  *is_null = false;
  if (!text.empty() && (text[0] == '\'' || text[0] == '"')) {
    const char quote = text[0];
    std::string value;
    size_t i = 1;
    for (; i < text.size(); ++i) {
      if (quote == '\'' && text[i] == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        value += '\'';
        ++i;
      } else if (text[i] == quote) {
        break;
      } else if (quote == '"' && text[i] == '\\' && i + 1 < text.size()) {
        const char c = text[++i];
        value += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      } else {
        value += text[i];
      }
    }
    const std::string rest = i < text.size() ? Trim(text.substr(i + 1)) : "";
    if (i >= text.size() || (!rest.empty() && rest[0] != '#')) {
      return InvalidArgument(where + ": a quoted value must end on its line with its quote");
    }
    return value;
  }
  std::string value = text;
  const size_t comment = value.find(" #");
  if (value.rfind('#', 0) == 0) value.clear();
  if (comment != std::string::npos) value = Trim(value.substr(0, comment));
  if (!value.empty() && std::string("{[&*!|>%@`").find(value[0]) != std::string::npos) {
    return InvalidArgument(where + ": '" + value +
                           "' is YAML kolo does not read (flow style, anchors, tags, block "
                           "scalars); write a plain value");
  }
  *is_null = value.empty() || value == "~" || value == "null" || value == "Null" || value == "NULL";
  return *is_null ? "" : value;
}

}  // namespace

StatusOr<std::vector<YamlEntry>> ParseYamlSubset(const std::string& text, const std::string& file) {
  std::vector<YamlEntry> entries;
  std::istringstream lines(text);
  std::string line, section;  // section: the open "name:" whose keys follow, indented
  size_t section_indent = 0;  // the indentation of its keys; 0 until the first
  bool section_has_keys = false;
  int section_line = 0;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = file + ":" + std::to_string(number);
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos || line[indent] == '#') continue;
    if (line[indent] == '\t') return InvalidArgument(where + ": tabs cannot indent YAML");
    const std::string rest = line.substr(indent);
    if (indent == 0 && (rest == "---" || rest.rfind("--- ", 0) == 0)) continue;
    if (indent == 0 && rest == "...") break;
    if (rest[0] == '-') return InvalidArgument(where + ": lists are not among Horovod's settings");
    const size_t colon = rest.find(':');
    if (colon == std::string::npos || colon == 0 ||
        (colon + 1 < rest.size() && rest[colon + 1] != ' ')) {
      return InvalidArgument(where + ": expected 'key: value', got '" + rest + "'");
    }
    const std::string key = rest.substr(0, colon);
    YamlEntry entry;
    entry.line = number;
    KOLO_ASSIGN_OR_RETURN(entry.value, Scalar(rest.substr(colon + 1), where, &entry.is_null));
    if (indent == 0) {
      if (!section.empty() && !section_has_keys)
        entries.push_back({section, "", true, section_line});
      section = entry.is_null ? key : "";
      section_line = number;
      section_indent = 0;
      section_has_keys = false;
      if (!entry.is_null) entries.push_back({key, entry.value, false, number});
      continue;
    }
    if (section.empty() || (section_indent != 0 && indent != section_indent)) {
      return InvalidArgument(where +
                             ": unexpected indentation (kolo reads top-level keys and "
                             "one level of keys under a section)");
    }
    section_indent = indent;
    section_has_keys = true;
    entry.key = section + "." + key;
    entries.push_back(entry);
  }
  if (!section.empty() && !section_has_keys) entries.push_back({section, "", true, section_line});
  return entries;
}

StatusOr<HorovodrunSettings> ConfigSettings(const std::vector<YamlEntry>& entries,
                                            const std::string& file) {
  HorovodrunSettings settings;
  for (const YamlEntry& entry : entries) {
    const std::string where = file + ":" + std::to_string(entry.line) + ": " + entry.key;
    const ConfigKey* known = nullptr;
    for (const ConfigKey& key : ConfigKeys()) {
      if (entry.key == key.key) known = &key;
    }
    if (known == nullptr && IsSection(entry.key)) {
      if (entry.is_null) continue;  // an empty section, as Horovod skips it
      return InvalidArgument(where + " must be a section of keys, not a value");
    }
    if (known == nullptr) {
      return InvalidArgument(file + ":" + std::to_string(entry.line) + ": unknown key '" +
                             entry.key + "' (kolo reads Horovod's keys: " + KnownKeys() + ")");
    }
    if (entry.is_null) continue;
    std::string value = entry.value;
    if (known->boolean) {
      KOLO_ASSIGN_OR_RETURN(bool on, YamlBool(value, where));
      value = on != known->inverted ? "1" : "0";
    }
    settings[known->dest] = Setting{value, where};
  }
  return settings;
}

StatusOr<HorovodrunSettings> ReadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("--config-file: cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  KOLO_ASSIGN_OR_RETURN(std::vector<YamlEntry> entries, ParseYamlSubset(text.str(), path));
  return ConfigSettings(entries, path);
}

}  // namespace kolo::launcher
