// HostList: the hosts of a multi-host kolorun job, from `-H host1:slots,host2:slots` or from an
// Open MPI style hostfile (`host slots=N`, `#` comments, blank lines). Pure parsing functions
// (ReadHostfile only reads the file) for kolorun's main thread and for tests; no state.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo::launcher {

struct Host {
  // How kolorun reaches the host: the ssh destination, `{host}` in a --launch-cmd template,
  // and the KOLO_HOSTNAME its ranks report (so local and cross ranks follow the host list).
  std::string name;
  // Where the other ranks reach this host (the controller's host when it is the first):
  // `name=ADDRESS` in -H, `address=ADDRESS` in a hostfile; empty means the name itself.
  std::string address;
  int slots = 1;  // ranks this host takes at most

  // The address, or the name when none was given.
  const std::string& Reachable() const { return address.empty() ? name : address; }
};

// Parses `-H` text: comma-separated `NAME[=ADDRESS][:SLOTS]` (SLOTS defaults to 1). A host
// listed twice adds its slots to its first place, as in Open MPI.
StatusOr<std::vector<Host>> ParseHostList(const std::string& text);

// Parses a hostfile's contents; `file` names it in errors ("hosts.txt:3: ..."). Each line is
// `NAME [slots=N] [max_slots=M] [address=A]` (`max-slots`, `count` accepted as in Open MPI);
// text after `#` is a comment. Unknown keywords are refused.
StatusOr<std::vector<Host>> ParseHostfile(const std::string& contents, const std::string& file);

// Reads and parses the hostfile at `path`.
StatusOr<std::vector<Host>> ReadHostfile(const std::string& path);

// The total number of slots.
int TotalSlots(const std::vector<Host>& hosts);

}  // namespace kolo::launcher
