// HorovodrunSettings: what horovodrun's tuning, library, logging and controller options (and
// the keys of its --config-file) ask of a job, by horovodrun's argparse dest, and how kolo does
// it: KOLO_* variables for every rank's environment, or one line saying why the option has no
// effect here. Used by ParseLaunchOptions on kolorun's main thread; pure functions (but
// JsrunInstalled, which looks at PATH).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "launcher/job_environment.h"

namespace kolo::launcher {

struct Setting {
  std::string value;  // the option's value; a flag's stored value ("1", "0", "gloo")
  std::string
      source;  // for messages: "--fusion-threshold-mb", "job.yaml:3 (params.cache_capacity)"
};

// By dest ("fusion_threshold_mb"); a later value of the same dest replaces an earlier one.
using HorovodrunSettings = std::map<std::string, Setting>;

// Whether `dest` is one of these settings (-np, -H, the ssh and elastic options and kolorun's
// output options are read by ParseLaunchOptions itself).
bool IsHorovodrunSetting(const std::string& dest);

// Adds `from_file` (the --config-file's settings) where `command_line` has no value for the
// same dest: the command line wins, as in horovodrun. A config `controller` applies only
// without --gloo, --mpi or --jsrun.
void MergeConfigSettings(const HorovodrunSettings& from_file, HorovodrunSettings* command_line);

struct RankSettings {
  // For every rank's environment, replacing what kolorun's own environment has (so a setting
  // wins over the environment, as horovodrun's do).
  std::vector<EnvVar> env;
  // One line per setting kolo has nothing to do for: "--gloo has no effect: ...".
  std::vector<std::string> notes;
};

// Checks each setting's value (as horovodrun's parser does, then against the range of the
// KOLO_* variable it becomes) and turns it into variables or notes. InvalidArgument naming the
// setting's source; for --jsrun where `jsrun_installed` is false, naming what kolo supports.
StatusOr<RankSettings> ResolveSettings(const HorovodrunSettings& settings, bool jsrun_installed);

// Puts `settings.env` into the ranks' environment: into `base_env` (kolorun's environment,
// which local ranks inherit), replacing what it has; and, for a name kolorun does not pass to
// ranks over ssh by itself (not KOLO_* or HOROVOD_*), into `forward_env` as NAME=VALUE.
void AddToRankEnvironment(const RankSettings& settings, std::vector<std::string>* base_env,
                          std::vector<std::string>* forward_env);

// Whether a `jsrun` program is on PATH.
bool JsrunInstalled();

}  // namespace kolo::launcher
