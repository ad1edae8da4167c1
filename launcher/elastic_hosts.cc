// Where an elastic job may run workers; see elastic_hosts.h.
#include "launcher/elastic_hosts.h"

#include <map>

namespace kolo::launcher {

std::string ElasticWorkerId(const std::string& host, int slot) {
  return host + ":" + std::to_string(slot);
}

bool ElasticHosts::Update(const std::vector<Host>& hosts) {
  std::map<std::string, int> after;
  for (const Host& host : hosts) after[host.name] = host.slots;
  bool removed = false;
  for (const Host& host : hosts_) {
    auto now = after.find(host.name);
    removed |= now == after.end() || now->second < host.slots;
  }
  hosts_ = hosts;
  known_ = true;
  return removed;
}

int ElasticHosts::SlotsOf(const std::string& host) const {
  const size_t at = IndexOf(host);
  return at < hosts_.size() ? hosts_[at].slots : 0;
}

size_t ElasticHosts::IndexOf(const std::string& host) const {
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i].name == host) return i;
  }
  return hosts_.size();
}

bool ElasticHosts::SlotOpen(const std::string& host, int slot, Clock::time_point now) {
  return !barred_hosts_.Bars(host, now) && !barred_slots_.Bars(ElasticWorkerId(host, slot), now);
}

bool ElasticHosts::BarAfterFailure(const std::string& host, int slot, const std::string& why,
                                   int min_np, Clock::time_point now, std::string* notice,
                                   bool* newly) {
  int elsewhere = 0;  // open slots on the other hosts
  for (const Host& other : hosts_) {
    if (other.name == host) continue;
    for (int s = 0; s < other.slots; ++s) elsewhere += SlotOpen(other.name, s, now) ? 1 : 0;
  }
  if (elsewhere < min_np) {
    // Horovod would bar the host and, with it, every worker there: on a job whose other hosts
    // cannot make up min_np (one host, say) that ends the job. Only the slot goes.
    const std::string id = ElasticWorkerId(host, slot);
    *newly = barred_slots_.Add(id, why, now);
    *notice = "blacklisted slot " + id + ", not its host: the other hosts have " +
              std::to_string(elsewhere) + " open slot(s), fewer than --min-np " +
              std::to_string(min_np);
    return false;
  }
  *newly = barred_hosts_.Add(host, why, now);
  *notice = "blacklisted host " + host + " (" + why + ")";
  return true;
}

std::optional<std::string> ElasticHosts::NoneLeft() const {
  if (hosts_.empty()) return std::nullopt;  // discovery may list hosts again: wait
  std::string barred;
  for (const Host& host : hosts_) {
    std::string why = barred_hosts_.BarsForGood(host.name) ? barred_hosts_.Why(host.name) : "";
    for (int slot = 0; why.empty() && slot < host.slots; ++slot) {
      const std::string id = ElasticWorkerId(host.name, slot);
      if (!barred_slots_.BarsForGood(id)) return std::nullopt;
      if (slot + 1 == host.slots) {
        why = "every slot had a failed worker, the last: " + barred_slots_.Why(id);
      }
    }
    barred += (barred.empty() ? "" : "; ") + host.name + " (" + why + ")";
  }
  return "no hosts left after blacklisting " + barred;
}

std::string ElasticHosts::InWords(Clock::time_point now) {
  if (hosts_.empty()) return "the discovery script lists no hosts";
  std::string listed;
  std::string barred;
  for (const Host& host : hosts_) {
    listed += (listed.empty() ? "" : ", ") + host.name + ":" + std::to_string(host.slots);
    if (barred_hosts_.Bars(host.name, now)) {
      barred += (barred.empty() ? "" : ", ") + host.name;
      continue;
    }
    for (int slot = 0; slot < host.slots; ++slot) {
      const std::string id = ElasticWorkerId(host.name, slot);
      if (barred_slots_.Bars(id, now)) barred += (barred.empty() ? "" : ", ") + id;
    }
  }
  return "hosts listed: " + listed + (barred.empty() ? "" : "; blacklisted: " + barred);
}

}  // namespace kolo::launcher
