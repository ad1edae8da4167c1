// LoopTasks: tasks handed to the loop run there, in order, once; a task the loop does not take
// in time is withdrawn and never runs; a closed loop runs tasks on their caller.
#include "core/loop/loop_tasks.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "tests/support/watchdog.h"

using namespace kolo;
using namespace std::chrono_literals;

TEST_CASE("A task handed to a closed loop runs on its caller's thread", "[core][loop]") {
  Wakeup wakeup;
  LoopTasks tasks(&wakeup);
  std::thread::id ran_on;
  CHECK(tasks.Hand([&] { ran_on = std::this_thread::get_id(); }, 30).ok());
  CHECK(ran_on == std::this_thread::get_id());
  tasks.Open();
  tasks.Close();
  bool ran = false;
  CHECK(tasks.Hand([&] { ran = true; }, 30).ok());
  CHECK(ran);
}

TEST_CASE("A task the loop does not take in time is withdrawn and never runs", "[core][loop]") {
  Wakeup wakeup;
  LoopTasks tasks(&wakeup);
  tasks.Open();
  bool ran = false;
  const Status late = tasks.Hand([&] { ran = true; }, 0);
  CHECK(late.code() == StatusCode::kDeadlineExceeded);
  CHECK(late.message() ==
        "the background thread did not get to the request within 0 s (KOLO_TIMEOUT_SECONDS)");
  tasks.RunPending();
  CHECK_FALSE(ran);
}

TEST_CASE("Tasks handed to the loop run on its thread in order, each once", "[core][loop]") {
  testing::Watchdog watchdog("loop tasks: hand-off", 30s);
  Wakeup wakeup;
  LoopTasks tasks(&wakeup);
  tasks.Open();
  std::atomic<bool> stop{false};
  std::vector<int> order;  // the loop's thread only
  std::thread::id loop_thread;
  std::thread loop([&] {
    loop_thread = std::this_thread::get_id();
    while (!stop) {
      wakeup.WaitUntil(std::chrono::steady_clock::now() + 10ms);
      tasks.RunPending();
    }
  });
  std::vector<std::thread::id> ran_on(3);
  std::vector<Status> handed(3);
  for (int i = 0; i < 3; ++i) {
    handed[i] = tasks.Hand(
        [&, i] {
          order.push_back(i);
          ran_on[i] = std::this_thread::get_id();
        },
        30);
  }
  stop = true;
  wakeup.Notify();
  loop.join();
  for (int i = 0; i < 3; ++i) {
    CHECK(handed[i].ok());
    CHECK(ran_on[i] == loop_thread);
  }
  CHECK(order == std::vector<int>{0, 1, 2});
}
