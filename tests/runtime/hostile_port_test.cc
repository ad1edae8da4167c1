// Hostile connections to rank 0's controller port with real rank processes (kolo_fault_worker)
// on loopback (issue 19, items 1 and 10):
// - a burst past rank 0's HARD descriptor limit (lowered to 128 in rank 0's process before it
//   starts kolo), held and then closed, must leave the controller accepting: a rank started
//   afterwards joins, and a new connection is answered (gRPC 1.51's own listener stopped for
//   good after one accept4() EMFILE);
// - connections that have not sent the HTTP/2 preface are capped, the oldest dropped, and the
//   job still forms while they are held;
// - garbage, HTTP/1, a TLS hello and silence each get a rate-limited log line naming the peer
//   and the reason, and are closed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/local_job.h"
#include "tests/support/loopback_client.h"
#include "tests/support/seconds_since.h"
#include "tests/support/watchdog.h"

using kolo::testing::ChildProcess;
using kolo::testing::CountOccurrences;
using kolo::testing::PickFreePort;
using kolo::testing::SendAll;
using kolo::testing::Watchdog;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kSecret =
    "KOLO_SECRET=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
constexpr const char* kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::vector<std::string> RankEnv(int rank, int port, const std::string& timeout, int size = 2) {
  return {"KOLO_RANK=" + std::to_string(rank),
          "KOLO_SIZE=" + std::to_string(size),
          "KOLO_CONTROLLER=127.0.0.1:" + std::to_string(port),
          "KOLO_TIMEOUT_SECONDS=" + timeout,
          "KOLO_START_TIMEOUT_SECONDS=10",
          "KOLO_LOG_LEVEL=warning",
          kSecret};
}

using kolo::testing::SecondsSince;

int Dial(int port) {
  return kolo::testing::DialLoopback(port, 300ms);
}

// Reads and discards until the peer closes `fd` or `limit` passes; the seconds until the
// close, -1 on the limit.
double SecondsUntilClosed(int fd, double limit) {
  const Clock::time_point start = Clock::now();
  while (SecondsSince(start) < limit) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return SecondsSince(start);
  }
  return -1;
}

// Whether the server has closed `fd` (EOF or reset is readable now).
bool ClosedByServer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) != 1) return false;
  char byte;
  return recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
}

// A new connection that sends the HTTP/2 preface and SETTINGS; the seconds until the server's
// first bytes (its SETTINGS) arrive, -1 if none within `limit`.
double SecondsUntilAnswered(int port, double limit) {
  const Clock::time_point start = Clock::now();
  while (SecondsSince(start) < limit) {
    const int fd = Dial(port);
    if (fd < 0) {
      std::this_thread::sleep_for(50ms);
      continue;
    }
    const std::string settings("\0\0\0\x04\0\0\0\0\0", 9);
    if (SendAll(fd, std::string(kPreface) + settings)) {
      pollfd p{fd, POLLIN, 0};
      const int left = static_cast<int>(1000 * (limit - SecondsSince(start)));
      char buffer[64];
      if (poll(&p, 1, std::max(left, 1)) == 1 && recv(fd, buffer, sizeof(buffer), 0) > 0) {
        close(fd);
        return SecondsSince(start);
      }
    }
    close(fd);
  }
  return -1;
}

// Waits until something listens on `port` (rank 0's controller is up).
bool WaitListening(int port, std::chrono::seconds limit) {
  const Clock::time_point deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    const int fd = Dial(port);
    if (fd >= 0) {
      close(fd);
      return true;
    }
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::vector<int> Burst(int port, int count, const std::string& first_bytes) {
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = Dial(port);
    if (fd < 0) continue;
    if (!first_bytes.empty()) SendAll(fd, first_bytes);
    fds.push_back(fd);
  }
  return fds;
}

}  // namespace

TEST_CASE("A connection burst past rank 0's hard fd limit leaves the controller accepting",
          "[runtime][hostile][security]") {
  Watchdog watchdog("burst past the hard fd limit", 150s);
  // Silent connections, and connections that speak HTTP/2 (they pass kolo's front door and
  // are held by gRPC until their idle close), both more than rank 0 may hold.
  const bool speaks_http2 = GENERATE(false, true);
  INFO((speaks_http2 ? "HTTP/2 burst" : "silent burst"));
  constexpr int kHardLimit = 128;
  constexpr int kBurst = 300;
  const int port = PickFreePort();
  // Like `ulimit -Hn 128` in rank 0's shell: kolo cannot raise its soft limit past it.
  std::vector<std::string> env0 = RankEnv(0, port, "20");
  // In a UBSan build (ignored otherwise): UBSan's vptr check of a type it has not seen yet
  // probes the object through a pipe, which a process with every descriptor taken cannot
  // make, so it reports the valid fmt buffer of kolo's "cannot accept" warning as "invalid
  // vptr". Halting on that would end the very process under test; the report still prints.
  env0.push_back("UBSAN_OPTIONS=halt_on_error=0:print_stacktrace=0");
  ChildProcess rank0(
      {"/bin/sh", "-c", "ulimit -n " + std::to_string(kHardLimit) + " && exec \"$0\"",
       KOLO_FAULT_WORKER},
      env0);
  REQUIRE(WaitListening(port, 20s));

  const std::string settings("\0\0\0\x04\0\0\0\0\0", 9);
  std::vector<int> burst = Burst(port, kBurst, speaks_http2 ? kPreface + settings : "");
  INFO(burst.size() << " of " << kBurst << " burst connections made");
  std::this_thread::sleep_for(1s);
  for (int fd : burst) close(fd);

  const Clock::time_point late_start = Clock::now();
  ChildProcess rank1({KOLO_FAULT_WORKER}, RankEnv(1, port, "20"));
  const bool joined = rank1.WaitForOutput("ready", 1, 25s);
  const double joined_after = SecondsSince(late_start);
  INFO("rank 0 log:\n" << rank0.StderrSoFar());
  INFO("rank 1 out:\n" << rank1.StdoutSoFar() << rank1.StderrSoFar());
  CHECK(joined);
  CHECK(rank0.WaitForOutput("ready", 1, 5s));
  const double answered = SecondsUntilAnswered(port, 5);
  std::fprintf(stderr,
               "measured: %s of %zu: rank 1 joined (printed ready) %.2f s after the burst closed; "
               "a new connection was answered in %.3f s\n",
               speaks_http2 ? "HTTP/2 burst" : "silent burst", burst.size(), joined_after,
               answered);
  CHECK(answered >= 0);
  if (speaks_http2) {
    // The HTTP/2 burst fills the descriptor table: the front door said so and went on.
    CHECK_THAT(rank0.StderrSoFar(), Catch::Contains("the controller cannot accept connections"));
  }
  CHECK(rank0.StdoutSoFar().find("FAILED") == std::string::npos);
}

TEST_CASE("Connections that never send the HTTP/2 preface are capped, the oldest dropped",
          "[runtime][hostile][security]") {
  Watchdog watchdog("pending-connection cap", 120s);
  constexpr int kBurst = 200;
  constexpr int kCap = 64;  // FrontDoor::kMaxPending
  const int port = PickFreePort();
  ChildProcess rank0({KOLO_FAULT_WORKER}, RankEnv(0, port, "20"));
  REQUIRE(WaitListening(port, 20s));
  std::vector<int> burst = Burst(port, kBurst, "");
  REQUIRE(burst.size() == static_cast<size_t>(kBurst));

  // The job forms while the burst is held: the real rank's connection is not starved.
  ChildProcess rank1({KOLO_FAULT_WORKER}, RankEnv(1, port, "20"));
  INFO("rank 0 log:\n" << rank0.StderrSoFar());
  CHECK(rank1.WaitForOutput("ready", 1, 25s));
  CHECK(rank0.WaitForOutput("ready", 1, 5s));

  // The oldest were dropped as newer ones came; at most the cap are still held.
  int dropped = 0;
  for (int fd : burst) dropped += ClosedByServer(fd) ? 1 : 0;
  std::fprintf(stderr, "measured: %d of %d pending connections dropped, rank 1 ready\n", dropped,
               kBurst);
  CHECK(dropped >= kBurst - kCap);
  CHECK(!ClosedByServer(burst.back()));  // the newest is still waiting
  for (int fd : burst) close(fd);
  CHECK_THAT(rank0.StderrSoFar(),
             Catch::Contains("64 connections were waiting for their HTTP/2 preface"));
  CHECK(rank0.StdoutSoFar().find("FAILED") == std::string::npos);
  CHECK(rank1.StdoutSoFar().find("FAILED") == std::string::npos);
}

TEST_CASE("A job of more ranks than the cap lets as many connections as its ranks wait",
          "[runtime][hostile][security]") {
  // A 1,024-rank job's ranks all connect at once; a cap of 64 dropped thousands of them at
  // start (each reconnecting after gRPC's backoff, docs/SCALE.md). The other 99 ranks of this
  // job never come: the burst is all the door sees before the start timeout.
  Watchdog watchdog("pending-connection cap of a 100-rank job", 60s);
  constexpr int kSize = 100;
  constexpr int kBurst = 120;
  const int port = PickFreePort();
  ChildProcess rank0({KOLO_FAULT_WORKER}, RankEnv(0, port, "20", kSize));
  REQUIRE(WaitListening(port, 20s));
  std::vector<int> burst = Burst(port, kBurst, "");
  REQUIRE(burst.size() == static_cast<size_t>(kBurst));
  auto dropped = [&] {
    int n = 0;
    for (int fd : burst) n += ClosedByServer(fd) ? 1 : 0;
    return n;
  };
  const Clock::time_point start = Clock::now();
  while (dropped() < kBurst - kSize && SecondsSince(start) < 10) {
    std::this_thread::sleep_for(10ms);
  }
  INFO("rank 0 log:\n" << rank0.StderrSoFar());
  // The oldest 20 went, the newest 100 still wait.
  CHECK(dropped() == kBurst - kSize);
  for (int i = 0; i < kBurst; ++i) {
    INFO("connection " << i);
    CHECK(ClosedByServer(burst[i]) == (i < kBurst - kSize));
  }
  for (int fd : burst) close(fd);
  CHECK_THAT(rank0.StderrSoFar(),
             Catch::Contains("100 connections were waiting for their HTTP/2 preface"));
}

TEST_CASE("Garbage, HTTP/1, TLS and silence on the controller port are logged and closed",
          "[runtime][hostile][security]") {
  Watchdog watchdog("non-gRPC bytes on the controller port", 120s);
  constexpr double kTimeout = 2;
  const int port = PickFreePort();
  ChildProcess rank0({KOLO_FAULT_WORKER}, RankEnv(0, port, "2"));
  ChildProcess rank1({KOLO_FAULT_WORKER}, RankEnv(1, port, "2"));
  REQUIRE(rank0.WaitForOutput("ready", 1, 25s));
  REQUIRE(rank1.WaitForOutput("ready", 1, 25s));

  struct Probe {
    std::string bytes;
    std::string logged;  // what rank 0's line must say
    double bound;        // seconds until the server closes the connection
  };
  const std::vector<Probe> probes = {
      {"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "an HTTP/1 request (GET /metrics), not gRPC", 1},
      {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + std::string(40, 'r'),
       "a TLS handshake, but this controller serves plaintext", 1},
      {std::string(40, '\x07'), "40 bytes that are not the HTTP/2 preface of a gRPC client", 1},
      {"", "sent nothing within 2 s", kTimeout + 2},
      {"PRI * HT", "sent 8 bytes of the HTTP/2 preface, then nothing within 2 s", kTimeout + 2},
  };
  for (const Probe& probe : probes) {
    INFO("probe expecting: " << probe.logged);
    const int fd = Dial(port);
    REQUIRE(fd >= 0);
    REQUIRE(SendAll(fd, probe.bytes));
    const double closed_after = SecondsUntilClosed(fd, 3 * kTimeout + 2);
    close(fd);
    std::fprintf(stderr, "measured: '%s' closed after %.3f s\n", probe.logged.c_str(),
                 closed_after);
    CHECK(closed_after >= 0);
    CHECK(closed_after <= probe.bound);
  }
  const std::string log = rank0.StderrSoFar();
  INFO("rank 0 log:\n" << log);
  for (const Probe& probe : probes) {
    CHECK_THAT(log, Catch::Contains("refused connection to the controller from ipv4:127.0.0.1:"));
    CHECK_THAT(log, Catch::Contains(probe.logged));
  }

  // Rate limit: a flood of HTTP/1 requests gets one line a second, and the next line counts
  // the ones left out.
  std::this_thread::sleep_for(1100ms);
  const int before = CountOccurrences(rank0.StderrSoFar(), "an HTTP/1 request");
  const Clock::time_point flood_start = Clock::now();
  for (int i = 0; i < 20; ++i) {
    const int fd = Dial(port);
    REQUIRE(fd >= 0);
    SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n");
    SecondsUntilClosed(fd, 2);
    close(fd);
  }
  std::this_thread::sleep_for(1100ms);
  const int fd = Dial(port);
  REQUIRE(fd >= 0);
  SendAll(fd, "GET /metrics HTTP/1.1\r\n\r\n");
  SecondsUntilClosed(fd, 2);
  close(fd);
  REQUIRE(rank0.WaitForStderr("more refused for this reason in the last second", 5s));
  // One line a second at most: the bound comes from how long the 21 refusals took (about 1.2
  // s on an idle machine, longer on a busy one), not from a guess of it.
  const double flood_seconds = SecondsSince(flood_start);
  const int lines = CountOccurrences(rank0.StderrSoFar(), "an HTTP/1 request") - before;
  INFO("rank 0 log:\n" << rank0.StderrSoFar());
  INFO("21 refusals in " << flood_seconds << " s");
  CHECK(lines >= 2);
  CHECK(lines <= static_cast<int>(flood_seconds) + 2);
  // The job's own streams were never touched.
  CHECK(rank0.StdoutSoFar().find("FAILED") == std::string::npos);
  CHECK(rank1.StdoutSoFar().find("FAILED") == std::string::npos);
}
