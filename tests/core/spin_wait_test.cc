// SpinWait and PollBudget (core/spin_wait.h): a wait sees a flag another thread sets within
// the budget, gives up once the budget has passed, checks once with a zero budget; a budget
// that keeps the core counts time on the core only (a gap off the core is free), one that
// yields counts wall time.
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

namespace {

// A clock the test moves by hand, for PollBudget.
steady_clock::time_point fake_now{};
steady_clock::time_point FakeNow() {
  return fake_now;
}

}  // namespace

TEST_CASE("PollBudget counts the time between polls until the budget is spent", "[core][spin]") {
  fake_now = steady_clock::time_point{};
  kolo::PollBudget budget(microseconds(100), kolo::BetweenPolls::kKeepCore, &FakeNow);
  for (int i = 0; i < 9; ++i) {
    fake_now += microseconds(10);
    CHECK_FALSE(budget.Spent());
  }
  fake_now += microseconds(10);
  CHECK(budget.Spent());
}

TEST_CASE("PollBudget keeping the core does not count a gap off the core", "[core][spin]") {
  // A preemption by another process (a gap far longer than a poll) leaves the budget as it
  // was: the waiter polls on when it has its core back, instead of sleeping just then.
  fake_now = steady_clock::time_point{};
  kolo::PollBudget budget(microseconds(100), kolo::BetweenPolls::kKeepCore, &FakeNow);
  fake_now += microseconds(50);
  CHECK_FALSE(budget.Spent());
  fake_now += milliseconds(4);  // a time slice of a busy process
  CHECK_FALSE(budget.Spent());
  fake_now += kolo::PollBudget::kOffCoreGap;  // the longest step still counted as polling
  CHECK(budget.Spent());
}

TEST_CASE("PollBudget yielding counts wall time, gaps included", "[core][spin]") {
  // Each yield may cost a time slice off the core; those must end a yielding wait.
  fake_now = steady_clock::time_point{};
  kolo::PollBudget budget(microseconds(100), kolo::BetweenPolls::kYield, &FakeNow);
  fake_now += milliseconds(4);
  CHECK(budget.Spent());
}

TEST_CASE("A zero PollBudget is spent at once", "[core][spin]") {
  fake_now = steady_clock::time_point{};
  kolo::PollBudget budget(microseconds(0), kolo::BetweenPolls::kKeepCore, &FakeNow);
  CHECK(budget.Spent());
}

TEST_CASE("SpinWait keeping the core sees a flag another thread sets", "[core][spin]") {
  std::atomic<bool> flag{false};
  std::thread setter([&] { flag.store(true); });
  CHECK(SpinWait([&] { return flag.load(); }, microseconds(5'000'000),
                 kolo::BetweenPolls::kKeepCore));
  setter.join();
}

TEST_CASE("A wait polls its whole budget only on a caller's thread", "[core][spin]") {
  // kolo's own thread runs ops beside the application's computation: it polls briefly.
  CHECK(kolo::ThisThreadPollBudget(microseconds(1000)) == kolo::kBackgroundPoll);
  CHECK(kolo::ThisThreadPollBudget(microseconds(10)) == microseconds(10));
  {
    kolo::CallerWaitScope caller;
    CHECK(kolo::ThisThreadPollBudget(microseconds(1000)) == microseconds(1000));
    {
      kolo::CallerWaitScope nested;
      CHECK(kolo::ThisThreadPollBudget(microseconds(1000)) == microseconds(1000));
    }
    CHECK(kolo::ThisThreadPollBudget(microseconds(1000)) == microseconds(1000));
  }
  CHECK(kolo::ThisThreadPollBudget(microseconds(1000)) == kolo::kBackgroundPoll);
  // Another thread is not the caller's.
  kolo::CallerWaitScope caller;
  std::chrono::microseconds elsewhere{};
  std::thread([&] { elsewhere = kolo::ThisThreadPollBudget(microseconds(1000)); }).join();
  CHECK(elsewhere == kolo::kBackgroundPoll);
}
