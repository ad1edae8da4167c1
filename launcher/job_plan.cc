// The per-rank launch plan; see job_plan.h.
#include "launcher/job_plan.h"

#include <algorithm>

#include "launcher/rank_placement.h"
#include "launcher/remote_command.h"

namespace kolo::launcher {
namespace {

// localhost, ::1 and every address of 127.0.0.0/8 (so that 127.0.0.2, 127.0.0.3, ... can stand
// for several hosts on one machine, as in an elastic job's tests).
bool IsLoopbackName(const std::string& name) {
  if (name == "localhost" || name == "[::1]" || name == "::1") return true;
  if (name.compare(0, 4, "127.") != 0) return false;
  int dots = 0;
  for (char c : name) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The hosts that run at least one rank, in order.
std::vector<Host> UsedHosts(const LaunchOptions& options) {
  std::vector<Host> used;
  int remaining = options.num_ranks;
  for (const Host& host : options.hosts) {
    if (remaining <= 0) break;
    used.push_back(host);
    remaining -= host.slots;
  }
  return used;
}

// What ranks started over ssh get from kolorun's environment besides kolorun's own variables:
// every KOLO_* and HOROVOD_* variable (the runtime's configuration) except the secret's and
// KOLO_DATA_ADDR, and the -x names. Local ranks inherit the whole environment instead.
StatusOr<std::vector<EnvVar>> ForwardedVariables(const LaunchOptions& options,
                                                 const std::vector<std::string>& base,
                                                 const std::vector<EnvVar>& ours) {
  auto is_ours = [&ours](const std::string& name) {
    for (const auto& var : ours) {
      if (var.first == name) return true;
    }
    return false;
  };
  std::vector<EnvVar> forwarded;
  for (const std::string& entry : base) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (!StartsWith(name, "KOLO_") && !StartsWith(name, "HOROVOD_")) continue;
    // The secret travels on stdin; a data address belongs to one host only.
    if (StartsWith(name, "KOLO_SECRET") || name == "KOLO_DATA_ADDR" || is_ours(name)) continue;
    forwarded.emplace_back(name, entry.substr(eq + 1));
  }
  for (const std::string& spec : options.forward_env) {
    size_t eq = spec.find('=');
    if (eq != std::string::npos) {
      forwarded.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
      continue;
    }
    bool found = false;
    for (const std::string& entry : base) {
      if (StartsWith(entry, spec + "=")) {
        forwarded.emplace_back(spec, entry.substr(spec.size() + 1));
        found = true;
      }
    }
    if (!found)
      return InvalidArgument("-x " + spec + ": '" + spec + "' is not set in kolorun's environment");
  }
  return forwarded;
}

// Whether kolorun's environment sets `name`.
bool Sets(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& entry : env) {
    if (StartsWith(entry, name + "=")) return true;
  }
  return false;
}

}  // namespace

bool IsThisHost(const std::string& name, const std::string& this_host) {
  if (IsLoopbackName(name) || name == this_host) return true;
  return !this_host.empty() && name == this_host.substr(0, this_host.find('.'));
}

std::string ControllerHost(const LaunchOptions& options, const PlanContext& context) {
  if (options.hosts.empty()) return "127.0.0.1";
  std::vector<Host> used = UsedHosts(options);
  const Host& first = used.front();
  if (!options.launch_template.empty() || !first.address.empty()) return first.Reachable();
  bool all_here = true;
  for (const Host& host : used) all_here = all_here && IsThisHost(host.name, context.this_host);
  if (all_here) return "127.0.0.1";
  return IsLoopbackName(first.name) ? context.this_host : first.name;
}

Status PlanLaunchPath(const LaunchOptions& options, const Host& host, const std::string& secret,
                      const PlanContext& context, RankLaunch* launch) {
  std::vector<EnvVar> with_secret = launch->rank_vars;
  with_secret.emplace_back("KOLO_SECRET", secret);
  if (!options.launch_template.empty()) {
    launch->path = LaunchPath::kTemplate;
    launch->argv = {
        "/bin/sh", "-c",
        SubstituteTemplate(options.launch_template, host) + " " + ShellJoin(options.command)};
    launch->env = MergeEnvironment(context.base_env, with_secret);
  } else if (IsThisHost(host.name, context.this_host)) {
    launch->path = LaunchPath::kLocal;
    launch->argv = options.command;
    launch->env = MergeEnvironment(context.base_env, with_secret);
  } else {
    launch->path = LaunchPath::kSsh;
    KOLO_ASSIGN_OR_RETURN(std::vector<EnvVar> forwarded,
                          ForwardedVariables(options, context.base_env, launch->rank_vars));
    launch->rank_vars.insert(launch->rank_vars.end(), forwarded.begin(), forwarded.end());
    launch->argv = SshArgv(options.ssh, host,
                           RemoteScript(context.working_dir, launch->rank_vars, options.command));
    std::vector<std::string> remote = {"env"};
    for (const auto& [name, value] : launch->rank_vars) remote.push_back(name + "=" + value);
    remote.insert(remote.end(), options.command.begin(), options.command.end());
    launch->remote_command = "cd " + ShellQuote(context.working_dir) + " && " + ShellJoin(remote);
    launch->env = context.base_env;
    launch->stdin_data = secret + "\n";
  }
  return Status::Ok();
}

StatusOr<std::vector<RankLaunch>> PlanJob(const LaunchOptions& options, const JobLayout& job,
                                          const PlanContext& context) {
  const bool host_list = !options.hosts.empty();
  std::vector<Host> hosts = options.hosts;
  if (!host_list) hosts.push_back(Host{"localhost", "", options.num_ranks});
  KOLO_ASSIGN_OR_RETURN(std::vector<RankPlacement> placements,
                        PlaceRanks(hosts, options.num_ranks));

  auto starts_here = [&](const RankPlacement& place) {
    return options.launch_template.empty() &&
           IsThisHost(hosts[static_cast<size_t>(place.host_index)].name, context.this_host);
  };
  // --bind-to core: one block of CPUs per rank started here, when each can have one.
  size_t here = 0;
  for (const RankPlacement& place : placements) here += starts_here(place) ? 1 : 0;
  const size_t block = options.bind_to_cores && here >= 2 && here <= context.cpus.size()
                           ? context.cpus.size() / here
                           : 0;
  size_t bound = 0;  // local ranks given their block so far
  // Unbound ranks sharing this host each see all of its CPUs, and torch, OpenMP and TensorFlow
  // start a compute thread per CPU in each: with a DataLoader beside them the ResNet-50 step
  // ran 3x slower than bound (docs/PERFORMANCE.md, "On a busy machine"). As torchrun does,
  // they get an equal share each (at least one), unless the user set OMP_NUM_THREADS.
  const std::string threads_each =
      block == 0 && here >= 2 && !Sets(context.base_env, "OMP_NUM_THREADS")
          ? std::to_string(std::max<size_t>(1, context.cpus.size() / here))
          : "";

  std::vector<RankLaunch> plan;
  for (const RankPlacement& place : placements) {
    const Host& host = hosts[static_cast<size_t>(place.host_index)];
    RankIdentity who{place.rank, place.local_rank, place.local_size, host_list ? host.name : ""};
    who.host = host.name;
    for (const RankPlacement& other : placements) {
      if (other.local_rank != place.local_rank) continue;
      who.cross_rank += other.rank < place.rank ? 1 : 0;
      who.cross_size += other.rank != place.rank ? 1 : 0;
    }
    RankLaunch launch;
    launch.rank = place.rank;
    launch.host = host.name;
    launch.rank_vars = RankVariables(who, job);
    if (block > 0 && starts_here(place)) {
      const auto first = context.cpus.begin() + static_cast<std::ptrdiff_t>(bound++ * block);
      launch.cpus.assign(first, first + static_cast<std::ptrdiff_t>(block));
      launch.rank_vars.emplace_back("KOLO_CPU_BIND", "core");
    } else if (!threads_each.empty() && starts_here(place)) {
      launch.rank_vars.emplace_back("OMP_NUM_THREADS", threads_each);
    }
    KOLO_RETURN_IF_ERROR(PlanLaunchPath(options, host, job.secret, context, &launch));
    plan.push_back(std::move(launch));
  }
  return plan;
}

std::string FormatPlan(const std::vector<RankLaunch>& plan) {
  std::string text;
  for (const RankLaunch& launch : plan) {
    const char* how = launch.path == LaunchPath::kLocal      ? "locally"
                      : launch.path == LaunchPath::kTemplate ? "through --launch-cmd"
                                                             : "over ssh";
    text +=
        "rank " + std::to_string(launch.rank) + ": host " + launch.host + ", started " + how + "\n";
    if (launch.path == LaunchPath::kSsh) {
      // The script is long and quoted twice; show what it does instead.
      std::vector<std::string> ssh(launch.argv.begin(), launch.argv.end() - 1);
      text += "  command: " + ShellJoin(ssh) + " 'sh -c SCRIPT'\n";
      text += "  remote: " + launch.remote_command +
              " (SCRIPT reads KOLO_SECRET from stdin, stops the rank at end of stdin)\n";
    } else {
      text += "  command: " + ShellJoin(launch.argv) + "\n";
    }
    if (!launch.cpus.empty()) {
      std::string cpus;
      for (int cpu : launch.cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(cpu);
      text += "  bound to CPUs: " + cpus + "\n";
    }
    for (const auto& [name, value] : launch.rank_vars) {
      text += "  env: " + name + "=" + value + "\n";
    }
    text += std::string("  env: KOLO_SECRET=(a fresh 64-hex-digit job secret") +
            (launch.path == LaunchPath::kSsh ? ", sent on ssh's stdin)\n" : ")\n");
  }
  return text;
}

}  // namespace kolo::launcher
