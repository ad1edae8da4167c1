// What an elastic job's failed workers barred; see elastic_blacklist.h.
#include "launcher/elastic_blacklist.h"

#include <algorithm>
#include <cmath>

namespace kolo::launcher {

bool ElasticBlacklist::Add(const std::string& key, const std::string& why, Clock::time_point now) {
  Entry& entry = entries_[key];
  const bool added = !entry.barred;
  entry.barred = true;
  entry.why = why;
  ++entry.blacklistings;
  if (cooldown_min_ > 0) {
    const double grown = cooldown_min_ * std::ldexp(1.0, std::min(entry.blacklistings, 30)) +
                         std::uniform_real_distribution<double>(0, cooldown_min_)(random_);
    const double seconds = std::clamp(grown, cooldown_min_, std::max(cooldown_min_, cooldown_max_));
    entry.until =
        now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  return added;
}

bool ElasticBlacklist::Bars(const std::string& key, Clock::time_point now) {
  auto it = entries_.find(key);
  if (it == entries_.end() || !it->second.barred) return false;
  if (cooldown_min_ > 0 && now >= it->second.until) {
    it->second.barred = false;  // its cooldown is over: Horovod's "resurrected" host
    return false;
  }
  return true;
}

bool ElasticBlacklist::BarsForGood(const std::string& key) const {
  auto it = entries_.find(key);
  return cooldown_min_ <= 0 && it != entries_.end() && it->second.barred;
}

std::string ElasticBlacklist::Why(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? "" : it->second.why;
}

}  // namespace kolo::launcher
