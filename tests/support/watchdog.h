// Watchdog: fails a multi-rank test fast, with a message, instead of letting a hang stall CI.
// Arm one at the top of a test; if it is still alive after `limit`, it prints which test hung
// and aborts the process. Thread-safe; the destructor disarms it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace kolo::testing {

class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::milliseconds limit) : what_(std::move(what)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
        std::fprintf(stderr, "WATCHDOG: '%s' did not finish within %lld ms; aborting\n",
                     what_.c_str(), static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace kolo::testing
