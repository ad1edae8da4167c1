// LaunchOptions: kolorun's command line, `kolorun [-np N] [-H hosts | --hostfile F] [options]
// [--] program [args...]`, in kolo's own spellings and in every spelling of horovodrun's
// (option_table.h; what each horovodrun option does: horovodrun_options.h).
// ParseLaunchOptions does no I/O but read the files named (--hostfile, --config-file) and look
// for jsrun on PATH, and never exits, so that tests can drive it; main() prints the usage text
// and the errors it returns.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"
#include "launcher/horovodrun_options.h"
#include "launcher/host_list.h"
#include "launcher/remote_command.h"

namespace kolo::launcher {

// The largest job kolorun starts (on one host or over a host list).
constexpr int kMaxRanks = 1024;

// Elastic mode (docs/ELASTIC.md): on when any of --min-np, --max-np or
// --host-discovery-script is given.
struct ElasticLaunch {
  bool enabled = false;
  int min_np = 0;                   // --min-np; default -np
  int max_np = 0;                   // --max-np; default the slots of every host (at most kMaxRanks)
  std::string discovery_script;     // --host-discovery-script; empty: the -H/--hostfile hosts
  int slots = 0;                    // --slots: a discovered host's slots when the script gives none
  double timeout_seconds = 600;     // --elastic-timeout (HOROVOD_ELASTIC_TIMEOUT's default)
  int reset_limit = -1;             // --reset-limit; -1: none
  double cooldown_min_seconds = 0;  // --blacklist-cooldown-range MIN MAX; 0: blacklisted for good
  double cooldown_max_seconds = 0;
};

struct LaunchOptions {
  int num_ranks = 0;                     // 0 with a host list: one rank per slot
  std::vector<std::string> command;      // the program and its arguments, passed to execvp
  std::vector<Host> hosts;               // -H or --hostfile; empty: every rank on this host
  std::string launch_template;           // --launch-cmd; empty: ssh to hosts that are not this one
  SshConfig ssh;                         // --rsh, -p/--ssh-port, -i/--ssh-identity
  std::vector<std::string> forward_env;  // -x NAME or NAME=VALUE, for ranks started over ssh
  std::string start_timeout;             // --start-timeout S, as given (KOLO_START_TIMEOUT_SECONDS)
  std::string output_dir;                // --output-dir: rank.N.out and rank.N.err files
  std::string output_filename;           // --output-filename: DIR/rank.N/stdout and stderr
  bool prefix_timestamps = false;        // --prefix-output-with-timestamp
  bool verbose = false;                  // --verbose: print the plan and settings on stderr
  std::string config_file;               // --config-file: Horovod's YAML settings
  // What horovodrun's tuning options and the config file ask of every rank (KOLO_* variables)
  // and the options that have no effect in kolo, each with its one line for stderr.
  RankSettings rank_settings;
  bool bind_to_cores = true;  // --bind-to core (default) or none
  bool dry_run = false;       // --dry-run: print the plan, start nothing
  ElasticLaunch elastic;
  bool show_help = false;      // --help: print UsageText() and exit 0
  bool show_env_help = false;  // --help-env: print the configuration table and exit 0
  bool show_version = false;   // -v, --version: print kolo's version and exit 0
  bool check_build = false;    // -cb, --check-build: print what this build has and exit 0
};

// Parses the arguments that follow argv[0]. Options end at the first argument that does not
// start with '-' or after "--"; everything after that is the command, untouched. An option may
// be spelled as horovodrun's argparse takes it: --opt VALUE, --opt=VALUE, -p2222, or a unique
// prefix of a --long name. Reads the --hostfile and the --config-file (the command line wins
// over it). Fails with kInvalidArgument and a message naming the bad argument (and, for a
// file, file:line).
StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args);

// The text `kolorun --help` prints: kolo's own options, then horovodrun's by its groups
// (usage_text.cc).
std::string UsageText();

}  // namespace kolo::launcher
