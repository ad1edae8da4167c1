// Wakeup: the background thread's one sleep. Real file descriptors (a pipe stands for a round
// connection) and real threads; every wait has a deadline, and the tests bound how long a
// wait that should return at once took.
#include "core/wakeup.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "core/tensor_queue.h"

using namespace kolo;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

// A pipe whose read end a wait watches, as it watches a peer's round connection.
struct Pipe {
  Pipe() { REQUIRE(pipe(fds) == 0); }
  ~Pipe() {
    close(fds[0]);
    close(fds[1]);
  }
  void Write() { REQUIRE(write(fds[1], "r", 1) == 1); }
  void Drain() {
    char c;
    REQUIRE(read(fds[0], &c, 1) == 1);
  }
  int fds[2];
};

// How long a wait until `deadline` over `fds` took.
Steady::duration Waited(Wakeup& wakeup, Steady::duration limit, const std::vector<int>& fds) {
  const Steady::time_point start = Steady::now();
  wakeup.WaitUntil(start + limit, fds);
  return Steady::now() - start;
}

}  // namespace

TEST_CASE("A wait returns for a Notify before it, a readable fd, or its deadline",
          "[core][wakeup]") {
  Wakeup wakeup;
  Pipe round;
  const std::vector<int> fds{round.fds[0]};
  CHECK(Waited(wakeup, 50ms, fds) >= 50ms);  // nothing: the deadline
  wakeup.Notify();
  CHECK(Waited(wakeup, 10s, fds) < 5s);
  CHECK(Waited(wakeup, 50ms, fds) >= 50ms);  // the Notify was consumed
  round.Write();
  CHECK(Waited(wakeup, 10s, fds) < 5s);
  CHECK(Waited(wakeup, 10s, fds) < 5s);  // level-triggered: still unread
  round.Drain();
  CHECK(Waited(wakeup, 50ms, fds) >= 50ms);
  CHECK(Waited(wakeup, 50ms, {}) >= 50ms);  // a wait without the fd ignores it
  round.Write();
  CHECK(Waited(wakeup, 50ms, {}) >= 50ms);
}

TEST_CASE("Muted fds do not end a wait; Unmute ends one in progress at once", "[core][wakeup]") {
  Wakeup wakeup;
  Pipe round;
  const std::vector<int> fds{round.fds[0]};
  CHECK(Waited(wakeup, 50ms, fds) >= 50ms);  // registers the fd
  wakeup.Mute();
  round.Write();
  CHECK(Waited(wakeup, 100ms, fds) >= 100ms);
  wakeup.Notify();  // muted fds leave Notify alone
  CHECK(Waited(wakeup, 10s, fds) < 5s);
  // A wait in progress while muted, with the fd readable, returns once unmuted.
  std::future<Steady::duration> waiting =
      std::async(std::launch::async, [&] { return Waited(wakeup, 10s, fds); });
  CHECK(waiting.wait_for(200ms) == std::future_status::timeout);
  const Steady::time_point unmuted = Steady::now();
  wakeup.Unmute();
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  waiting.get();
  CHECK(Steady::now() - unmuted < 5s);
  CHECK(Waited(wakeup, 10s, fds) < 5s);  // unmuted: still unread
}

TEST_CASE("An enqueue under a QuietScope leaves the wake-up to its thread", "[core][wakeup]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  auto entry = [](const std::string& name) {
    auto e = std::make_unique<TensorEntry>();
    e->meta.name = name;
    return e;
  };
  {
    TensorQueue::QuietScope quiet;
    REQUIRE(queue.Enqueue(entry("quiet")).ok());
    // Other threads still wake it.
    std::thread([&] { REQUIRE(queue.Enqueue(entry("loud")).ok()); }).join();
  }
  CHECK(Waited(wakeup, 10s, {}) < 5s);  // the other thread's
  CHECK(queue.InFlight() == 2);
  {
    TensorQueue::QuietScope quiet;
    REQUIRE(queue.Enqueue(entry("quiet/2")).ok());
  }
  CHECK(Waited(wakeup, 50ms, {}) >= 50ms);
  REQUIRE(queue.Enqueue(entry("after")).ok());  // the scope is gone
  CHECK(Waited(wakeup, 10s, {}) < 5s);
  CHECK(queue.InFlight() == 4);
}
