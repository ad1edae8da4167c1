// RefusalLog: logs refused connections (control stream or data mesh) at most once per second per
// reason, so that a flood of bogus connections cannot flood the log. A line that ends a quiet
// period says how many were suppressed before it. Used by GrpcControlServer and MeshConnector.
// Threading: Refused() may be called from any thread (a mutex guards the counters).
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "core/logging.h"
#include "core/mutex.h"

namespace kolo::transport {

class RefusalLog {
 public:
  // `what`: "control stream", "data connection" ... for the log line.
  RefusalLog(Logger logger, std::string what)
      : logger_(std::move(logger)), what_(std::move(what)) {}

  // Logs "refused <what> from <remote>: <reason>" unless a line with this `reason_key` went
  // out less than a second ago; then it only counts. `reason_key` groups lines (a short
  // constant such as "bad-mac"); `reason` is the full text and must not contain secrets.
  void Refused(const std::string& reason_key, const std::string& remote, const std::string& reason);

 private:
  struct Entry {
    std::chrono::steady_clock::time_point last_logged{};
    long suppressed = 0;
    bool logged_once = false;
  };
  const Logger logger_;     // constant after construction
  const std::string what_;  // constant after construction
  Mutex mu_;
  std::map<std::string, Entry> entries_ KOLO_GUARDED_BY(mu_);  // by reason key
};

}  // namespace kolo::transport
