// SpinWait (core/spin_wait.h): sees a flag another thread sets within the budget, gives up
// once the budget has passed, and checks once with a zero budget.
#include "core/spin_wait.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

using kolo::SpinWait;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST_CASE("SpinWait returns true once another thread sets the flag", "[core][spin]") {
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(2));
    flag.store(true);
  });
  // A budget far beyond the setter's delay: the wait ends when the flag is seen.
  const auto start = steady_clock::now();
  CHECK(SpinWait([&] { return flag.load(); }, microseconds(5'000'000)));
  CHECK(steady_clock::now() - start < std::chrono::seconds(4));
  setter.join();
}

TEST_CASE("SpinWait gives up after its budget", "[core][spin]") {
  int checks = 0;
  const auto start = steady_clock::now();
  CHECK_FALSE(SpinWait(
      [&] {
        ++checks;
        return false;
      },
      microseconds(3000)));
  CHECK(steady_clock::now() - start >= microseconds(3000));
  CHECK(checks > 1);
}

TEST_CASE("SpinWait with a zero budget checks once", "[core][spin]") {
  int checks = 0;
  auto never = [&] {
    ++checks;
    return false;
  };
  CHECK_FALSE(SpinWait(never, microseconds(0)));
  CHECK(checks == 1);
  CHECK(SpinWait([] { return true; }, microseconds(0)));
}
