// ElasticHosts: where an elastic job may run workers: the hosts the last discovery listed (in
// its order of preference) and what failed workers barred, a host or a single slot
// (ElasticBlacklist, with Horovod's cooldown). It answers which slots are open, bars after a
// failure, and says in words what is listed and barred. Used by ElasticMembership under its
// mutex; not thread-safe itself.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/elastic_blacklist.h"
#include "launcher/host_list.h"

namespace kolo::launcher {

// A worker's id: "HOST:SLOT".
std::string ElasticWorkerId(const std::string& host, int slot);

class ElasticHosts {
 public:
  using Clock = std::chrono::steady_clock;

  ElasticHosts(double cooldown_min_seconds, double cooldown_max_seconds)
      : barred_hosts_(cooldown_min_seconds, cooldown_max_seconds),
        barred_slots_(cooldown_min_seconds, cooldown_max_seconds) {}

  // Takes a new discovery; true when it removed something (a host, or slots of one).
  bool Update(const std::vector<Host>& hosts);
  const std::vector<Host>& listed() const { return hosts_; }
  bool known() const { return known_; }  // Update was called
  // The slots of `host` it lists now; 0 when it does not list it.
  int SlotsOf(const std::string& host) const;
  // The position of `host` in the list (its size when absent).
  size_t IndexOf(const std::string& host) const;

  // Slot `slot` of `host` may get a worker at `now` (neither it nor its host is barred).
  bool SlotOpen(const std::string& host, int slot, Clock::time_point now);
  // After worker `slot` of `host` failed (`why`): bars the host when the other hosts still have
  // `min_np` open slots (Horovod's rule), else only the slot, so that a job that cannot do
  // without the host (one host, say) goes on. Returns whether the host was barred, and sets
  // `notice` to a line for kolorun to print; `*newly` says whether anything new was barred.
  bool BarAfterFailure(const std::string& host, int slot, const std::string& why, int min_np,
                       Clock::time_point now, std::string* notice, bool* newly);
  // "no hosts left after blacklisting H (why)..." when every listed host is barred for good
  // (itself or every slot); nullopt otherwise, and when none is listed (more may come).
  std::optional<std::string> NoneLeft() const;
  // "hosts listed: a:2, b:1; blacklisted: b, a:1", or that none is listed.
  std::string InWords(Clock::time_point now);

 private:
  std::vector<Host> hosts_;
  bool known_ = false;
  ElasticBlacklist barred_hosts_;  // by host name
  ElasticBlacklist barred_slots_;  // by worker id
};

}  // namespace kolo::launcher
