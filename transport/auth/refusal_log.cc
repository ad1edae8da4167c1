#include "transport/auth/refusal_log.h"

namespace kolo::transport {

void RefusalLog::Refused(const std::string& reason_key, const std::string& remote,
                         const std::string& reason) {
  const auto now = std::chrono::steady_clock::now();
  long suppressed = 0;
  {
    MutexLock lock(&mu_);
    Entry& entry = entries_[reason_key];
    if (entry.logged_once && now - entry.last_logged < std::chrono::seconds(1)) {
      ++entry.suppressed;
      return;
    }
    suppressed = entry.suppressed;
    entry.suppressed = 0;
    entry.last_logged = now;
    entry.logged_once = true;
  }
  if (suppressed == 0) {
    logger_->warn("refused {} from {}: {}", what_, remote, reason);
  } else {
    logger_->warn(
        "refused {} from {}: {} ({} more refused for this reason in the last second "
        "were not logged)",
        what_, remote, reason, suppressed);
  }
}

}  // namespace kolo::transport
