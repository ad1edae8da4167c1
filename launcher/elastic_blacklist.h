// ElasticBlacklist: what the failed workers of an elastic job barred, by key (a host name, or a
// worker id "HOST:SLOT"): why, and until when. With a cooldown range (Horovod's
// --blacklist-cooldown-range MIN MAX) an entry lifts after MIN·2^n plus up to MIN more seconds
// (n: the key's blacklistings), at most MAX; with none (MIN 0) it stays for good.
// Used by ElasticMembership under its mutex: not thread-safe itself.
#pragma once

#include <chrono>
#include <map>
#include <random>
#include <string>

namespace kolo::launcher {

class ElasticBlacklist {
 public:
  using Clock = std::chrono::steady_clock;

  ElasticBlacklist(double cooldown_min_seconds, double cooldown_max_seconds)
      : cooldown_min_(cooldown_min_seconds), cooldown_max_(cooldown_max_seconds) {}

  // Bars `key` from `now` (again, if it was); `why` says what failed. True when it was not
  // barred before.
  bool Add(const std::string& key, const std::string& why, Clock::time_point now);
  // Whether `key` is barred at `now`; an entry whose cooldown ended is lifted here.
  bool Bars(const std::string& key, Clock::time_point now);
  // Barred and never to be lifted (no cooldown range).
  bool BarsForGood(const std::string& key) const;
  // Why `key` was last barred ("" if never).
  std::string Why(const std::string& key) const;

 private:
  struct Entry {
    int blacklistings = 0;
    bool barred = false;
    Clock::time_point until{};
    std::string why;
  };

  const double cooldown_min_;
  const double cooldown_max_;
  std::map<std::string, Entry> entries_;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace kolo::launcher
