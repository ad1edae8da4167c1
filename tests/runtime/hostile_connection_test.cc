// Hostile connections to rank 0's controller port (issue 19, items 1 and 2), from raw sockets
// in the test process on loopback: a burst of connections past the soft descriptor limit the
// job started with must leave the controller accepting (init raises the soft limit to the
// hard one), and an HTTP/2 connection that never opens a stream must be closed within
// KOLO_TIMEOUT_SECONDS. The burst lowers this process's own soft RLIMIT_NOFILE (the process
// under test) instead of exhausting the machine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/loopback_client.h"
#include "tests/support/seconds_since.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::PickFreePort;
using kolo::testing::SendAll;
using kolo::testing::Watchdog;

namespace {

using Clock = std::chrono::steady_clock;

using kolo::testing::SecondsSince;

// Generous: the burst below fills the accept backlog on a busy machine.
int Dial(int port) {
  return kolo::testing::DialLoopback(port, std::chrono::seconds(5));
}

// An HTTP/2 frame header (RFC 7540 §4.1) followed by `payload`.
std::string Frame(uint8_t type, uint8_t flags, const std::string& payload) {
  std::string frame(9, '\0');
  frame[0] = static_cast<char>(payload.size() >> 16);
  frame[1] = static_cast<char>(payload.size() >> 8);
  frame[2] = static_cast<char>(payload.size());
  frame[3] = static_cast<char>(type);
  frame[4] = static_cast<char>(flags);
  return frame + payload;
}

constexpr uint8_t kSettings = 4, kPing = 6, kAck = 1;

// A well-behaved HTTP/2 client that never opens a stream: sends the preface and SETTINGS,
// acknowledges the server's SETTINGS and answers its pings until the server closes the
// connection or `limit` passes. Returns the seconds until the close, or -1 on the limit.
// With `stop_at_settings`, returns as soon as the server's SETTINGS arrived (the listener
// accepted and speaks HTTP/2), -1 if they did not within `limit`.
double IdleHttp2Client(int port, double limit, bool stop_at_settings) {
  const Clock::time_point start = Clock::now();
  const int fd = Dial(port);
  if (fd < 0) return -1;
  std::string in;
  bool ok = SendAll(fd, std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + Frame(kSettings, 0, ""));
  double closed_after = -1;
  while (ok && SecondsSince(start) < limit) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      closed_after = SecondsSince(start);
      break;
    }
    in.append(buffer, static_cast<size_t>(n));
    while (in.size() >= 9) {
      const size_t length = (static_cast<uint8_t>(in[0]) << 16) |
                            (static_cast<uint8_t>(in[1]) << 8) | static_cast<uint8_t>(in[2]);
      if (in.size() < 9 + length) break;
      const auto type = static_cast<uint8_t>(in[3]);
      const auto flags = static_cast<uint8_t>(in[4]);
      if (type == kSettings && (flags & kAck) == 0) {
        if (stop_at_settings) {
          close(fd);
          return SecondsSince(start);
        }
        ok = ok && SendAll(fd, Frame(kSettings, kAck, ""));
      } else if (type == kPing && (flags & kAck) == 0) {
        ok = ok && SendAll(fd, Frame(kPing, kAck, in.substr(9, length)));
      }
      in.erase(0, 9 + length);
    }
  }
  close(fd);
  return stop_at_settings ? -1 : closed_after;
}

std::string AllreduceWorks(Runtime& rt, const std::string& name) {
  float x[4] = {1, 1, 1, 1};
  TensorView view{x, DataType::kFloat32, {4}, Device::Cpu()};
  Status s = rt.Allreduce(name, view, view);
  if (!s.ok()) return s.ToString();
  return x[0] == static_cast<float>(rt.size()) ? "" : "wrong sum";
}

}  // namespace

TEST_CASE("An HTTP/2 connection that never opens a stream is closed within the timeout",
          "[runtime][hostile][security]") {
  Watchdog watchdog("idle HTTP/2 connections", std::chrono::seconds(60));
  constexpr double kTimeout = 2;
  const int port = PickFreePort();
  LocalJob job(2, [&](Options& options) {
    options.controller_address = "127.0.0.1:" + std::to_string(port);
    options.timeout_seconds = kTimeout;
  });
  const double closed_after = IdleHttp2Client(port, 6 * kTimeout, false);
  INFO("closed after " << closed_after << " s");
  CHECK(closed_after >= 0);
  CHECK(closed_after <= kTimeout + 2);
  // The job's own connections are never idle: it goes on after two more timeouts.
  CHECK(job.RunOnAllRanks([](Runtime& rt) { return AllreduceWorks(rt, "after-idle"); }) ==
        std::vector<std::string>{});
}

TEST_CASE("A connection burst past the starting soft fd limit leaves the controller accepting",
          "[runtime][hostile][security]") {
  Watchdog watchdog("connection burst", std::chrono::seconds(90));
  constexpr rlim_t kLowered = 256;
  constexpr int kBurst = 600;
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 4 * kBurst) {
    WARN("hard fd limit " << saved.rlim_max << " too low for the burst; skipped");
    return;
  }
  rlimit lowered = saved;
  lowered.rlim_cur = kLowered;  // like `ulimit -n 256` before starting the job
  REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  struct Restore {
    rlimit limit;
    ~Restore() { setrlimit(RLIMIT_NOFILE, &limit); }
  } restore{saved};

  const int port = PickFreePort();
  LocalJob job(2, [&](Options& options) {
    options.controller_address = "127.0.0.1:" + std::to_string(port);
  });
  rlimit now{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &now) == 0);
  CHECK(now.rlim_cur == saved.rlim_max);  // init raised the soft limit to the hard one

  // The burst: more connections than the lowered limit allowed, held, then closed.
  std::vector<int> burst;
  for (int i = 0; i < kBurst; ++i) {
    const int fd = Dial(port);
    if (fd < 0) break;
    burst.push_back(fd);
  }
  CHECK(burst.size() == static_cast<size_t>(kBurst));
  usleep(1000 * 1000);
  for (int fd : burst) close(fd);

  // The listener still accepts: a new connection gets the server's HTTP/2 SETTINGS.
  const double answered = IdleHttp2Client(port, 5, true);
  INFO("a new connection was answered after " << answered << " s");
  CHECK(answered >= 0);
  CHECK(job.RunOnAllRanks([](Runtime& rt) { return AllreduceWorks(rt, "after-burst"); }) ==
        std::vector<std::string>{});
}
