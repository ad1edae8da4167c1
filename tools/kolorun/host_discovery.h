// HostDiscovery: runs an elastic job's --host-discovery-script (Horovod's contract: it prints
// the hosts that may run workers now, one "HOST[:SLOTS]" a line) and parses what it printed.
// Called on kolorun's single thread; RunDiscoveryScript blocks for at most its timeout.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "tools/kolorun/host_list.h"

namespace kolo::launcher {

// The hosts in `output`: one per non-blank line, "NAME[=ADDRESS][:SLOTS]" as in -H, with
// `default_slots` where a line gives none. A host listed twice adds its slots to its first place.
// The error names the offending line.
StatusOr<std::vector<Host>> ParseDiscoveredHosts(const std::string& output, int default_slots);

// Runs `script` with /bin/sh -c (so it may carry arguments), its stdin /dev/null and its stderr
// kolorun's, and parses its stdout. Fails, naming the script, when it exits non-zero, is killed,
// or has not finished within `timeout` (it is then killed, with its process group).
StatusOr<std::vector<Host>> RunDiscoveryScript(const std::string& script, int default_slots,
                                               std::chrono::milliseconds timeout);

}  // namespace kolo::launcher
