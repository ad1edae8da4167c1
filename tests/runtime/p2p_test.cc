// Point-to-point (kolo/p2p.h) between thread-ranks of one process, over real gRPC and real
// loopback sockets: every dtype and size over each way bytes travel (inline, the single copy,
// PULL and DATA over TCP), FIFO per tag, receives from any rank, process sets, and the failures:
// disagreements on both ends, timeouts naming the peer and the tag, bad arguments.
#include "kolo/p2p.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <thread>

#include "tests/support/local_job.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TensorView View(std::vector<uint8_t>& bytes, DataType dtype, int64_t count) {
  return {bytes.data(), dtype, {count}, Device::Cpu()};
}

// Each rank sends its values to the next rank and receives the previous rank's, at once.
std::string RingExchange(Runtime& rt, DataType dtype, int64_t count, int64_t tag) {
  const int n = rt.size();
  const int next = (rt.rank() + 1) % n;
  const int prev = (rt.rank() + n - 1) % n;
  std::vector<uint8_t> out = kolo::testing::MakeInput(dtype, count, rt.rank(), ReduceOp::kSum);
  std::vector<uint8_t> in(out.size(), 0xAB);
  const std::vector<uint8_t> expected =
      kolo::testing::MakeInput(dtype, count, prev, ReduceOp::kSum);
  PointToPoint p2p(rt);
  int source = -7;
  StatusOr<Handle> recv = p2p.RecvAsync(View(in, dtype, count), prev, tag, &source);
  if (!recv.ok()) return "recv: " + recv.status().ToString();
  StatusOr<Handle> send = p2p.SendAsync(View(out, dtype, count), next, tag);
  if (!send.ok()) return "send: " + send.status().ToString();
  Status s = send->Synchronize();
  if (!s.ok()) return "send: " + s.ToString();
  s = recv->Synchronize();
  if (!s.ok()) return "recv: " + s.ToString();
  if (in != expected) {
    return DataTypeName(dtype) + " x " + std::to_string(count) + ": wrong values from rank " +
           std::to_string(prev);
  }
  if (source != prev) return "source " + std::to_string(source);
  return "";
}

std::string Joined(const std::vector<std::string>& failures) {
  std::string text;
  for (const std::string& f : failures) text += f + "\n";
  return text;
}

}  // namespace

TEST_CASE("Send and recv carry every dtype and size, inline, by single copy and over TCP",
          "[runtime][p2p]") {
  const bool tcp = GENERATE(false, true);
  const int n = GENERATE(2, 3);
  Watchdog watchdog("p2p ring exchange", std::chrono::seconds(120));
  LocalJob job(n, [tcp](Options& o) {
    if (tcp) o.transport = Transport::kTcp;
  });
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    int64_t tag = 0;
    for (DataType dtype : kolo::testing::kAllDataTypes) {
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{13}}) {
        std::string f = RingExchange(rt, dtype, count, ++tag);
        if (!f.empty()) return f;
      }
    }
    // Around the inline limit (64 KiB), and large enough for several socket buffers.
    for (int64_t count : {int64_t{16383}, int64_t{16384}, int64_t{16385}, int64_t{3 << 20}}) {
      std::string f = RingExchange(rt, DataType::kFloat32, count, ++tag);
      if (!f.empty()) return f;
    }
    return "";
  });
  CHECK(Joined(failures) == "");
}

TEST_CASE("Per pair and tag the order is FIFO; other tags do not wait", "[runtime][p2p]") {
  Watchdog watchdog("p2p FIFO per tag", std::chrono::seconds(60));
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    PointToPoint p2p(rt);
    if (rt.rank() == 0) {
      // Tag 1 three times (values 10, 11, 12; the last large), then tag 2 once (20).
      std::vector<std::vector<int32_t>> values = {
          {10}, {11}, std::vector<int32_t>(40000, 12), {20}};
      const int64_t tags[] = {1, 1, 1, 2};
      std::vector<Handle> sends;
      for (size_t i = 0; i < values.size(); ++i) {
        TensorView v{values[i].data(),
                     DataType::kInt32,
                     {static_cast<int64_t>(values[i].size())},
                     Device::Cpu()};
        StatusOr<Handle> h = p2p.SendAsync(v, 1, tags[i]);
        if (!h.ok()) return h.status().ToString();
        sends.push_back(*h);
      }
      for (Handle& h : sends) {
        Status s = h.Synchronize();
        if (!s.ok()) return s.ToString();
      }
      return "";
    }
    // Tag 2 first: it does not wait for the tag-1 sends ahead of it.
    int32_t got = 0;
    Status s = p2p.Recv({&got, DataType::kInt32, {1}, Device::Cpu()}, 0, 2).status();
    if (!s.ok() || got != 20) return "tag 2: " + s.ToString() + " " + std::to_string(got);
    for (int32_t want : {10, 11}) {
      s = p2p.Recv({&got, DataType::kInt32, {1}, Device::Cpu()}, 0, 1).status();
      if (!s.ok() || got != want) return "tag 1: " + s.ToString() + " " + std::to_string(got);
    }
    std::vector<int32_t> big(40000, 0);
    s = p2p.Recv({big.data(), DataType::kInt32, {40000}, Device::Cpu()}, 0, 1).status();
    if (!s.ok() || big != std::vector<int32_t>(40000, 12)) return "tag 1 large: " + s.ToString();
    return "";
  });
  CHECK(Joined(failures) == "");
}

TEST_CASE("A recv from any rank takes each sender's send and says who sent it", "[runtime][p2p]") {
  Watchdog watchdog("p2p any source", std::chrono::seconds(60));
  LocalJob job(4);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    PointToPoint p2p(rt);
    if (rt.rank() != 0) {
      int64_t value = 100 + rt.rank();
      return p2p.Send({&value, DataType::kInt64, {1}, Device::Cpu()}, 0, 5).ToString() == "OK"
                 ? ""
                 : "send failed";
    }
    std::vector<bool> seen(4, false);
    for (int i = 0; i < 3; ++i) {
      int64_t value = 0;
      StatusOr<int> from = p2p.Recv({&value, DataType::kInt64, {1}, Device::Cpu()}, kAnySource, 5);
      if (!from.ok()) return from.status().ToString();
      if (*from < 1 || *from > 3 || seen[*from] || value != 100 + *from) {
        return "got " + std::to_string(value) + " from " + std::to_string(*from);
      }
      seen[*from] = true;
    }
    return "";
  });
  CHECK(Joined(failures) == "");
}

TEST_CASE("Ranks of a process set are the set's; its tags are its own", "[runtime][p2p]") {
  Watchdog watchdog("p2p in a process set", std::chrono::seconds(60));
  LocalJob job(4);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    StatusOr<int> set = rt.AddProcessSet({1, 3});
    if (!set.ok()) return set.status().ToString();
    if (rt.rank() != 1 && rt.rank() != 3) return "";
    ProcessSetScope scope(*set);
    PointToPoint p2p(rt);
    float value = rt.rank() == 1 ? 1.5f : 0.0f;
    TensorView v{&value, DataType::kFloat32, {1}, Device::Cpu()};
    if (rt.rank() == 1) {
      if (p2p.Send(v, 1, 9).ok()) return "";  // set rank 1 is job rank 3
      return "send failed";
    }
    StatusOr<int> from = p2p.Recv(v, kAnySource, 9);
    if (!from.ok()) return from.status().ToString();
    if (*from != 0 || value != 1.5f) return "from " + std::to_string(*from);
    // Job rank 2 is not in the set.
    Status bad = p2p.Send(v, 2, 9);
    if (bad.code() != StatusCode::kInvalidArgument ||
        bad.message().find("rank 2 is not a rank of process set") == std::string::npos) {
      return "out of set: " + bad.ToString();
    }
    return "";
  });
  CHECK(Joined(failures) == "");
}

TEST_CASE("A disagreeing pair fails on both ends naming both; the lane goes on",
          "[runtime][p2p][fault]") {
  const bool large = GENERATE(false, true);
  Watchdog watchdog("p2p mismatch", std::chrono::seconds(60));
  LocalJob job(2);
  const int64_t count = large ? 100000 : 10;
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    PointToPoint p2p(rt);
    std::vector<float> data(count + (rt.rank() == 1 ? 1 : 0), 1.0f);
    TensorView v{
        data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}, Device::Cpu()};
    Status s = rt.rank() == 0 ? p2p.Send(v, 1, 3) : p2p.Recv(v, 0, 3).status();
    const std::string want =
        "send from rank 0 to rank 1 (tag 3) and its recv disagree: rank 0 "
        "sends " +
        std::to_string(count * 4) + " bytes (" + std::to_string(count) +
        " x float32), rank 1 receives " + std::to_string((count + 1) * 4) + " bytes";
    if (s.code() != StatusCode::kMismatch || s.message().find(want) == std::string::npos) {
      return "mismatch: " + s.ToString();
    }
    // The next pair on the same connection works.
    int32_t x = rt.rank() == 0 ? 42 : 0;
    TensorView xv{&x, DataType::kInt32, {1}, Device::Cpu()};
    s = rt.rank() == 0 ? p2p.Send(xv, 1, 3) : p2p.Recv(xv, 0, 3).status();
    if (!s.ok() || x != 42) return "after: " + s.ToString();
    return "";
  });
  CHECK(Joined(failures) == "");
}

TEST_CASE("An op its peer never matches fails within its timeout naming the peer and the tag",
          "[runtime][p2p][fault]") {
  Watchdog watchdog("p2p timeouts", std::chrono::seconds(60));
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    PointToPoint p2p(rt);
    P2pOptions quick;
    quick.timeout_seconds = 0.5;
    std::vector<float> data(rt.rank() == 0 ? 10 : 100000, 1.0f);
    TensorView v{
        data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}, Device::Cpu()};
    const Clock::time_point start = Clock::now();
    // Rank 0 receives what nobody sends; rank 1 sends (a large tensor) what nobody receives.
    Status s = rt.rank() == 0 ? p2p.Recv(v, 1, 77, quick).status() : p2p.Send(v, 0, 78, quick);
    const double took = SecondsSince(start);
    const std::string want = rt.rank() == 0
                                 ? "recv from rank 1 (tag 77): no matching send from rank 1 "
                                   "arrived within 0.5 s"
                                 : "send to rank 0 (tag 78): rank 0 posted no matching recv "
                                   "within 0.5 s";
    if (s.code() != StatusCode::kDeadlineExceeded || s.message().find(want) == std::string::npos) {
      return s.ToString();
    }
    if (took < 0.45 || took > 3.0) return "took " + std::to_string(took) + " s";
    // Both still serve: a pair that matches.
    int32_t x = rt.rank() == 0 ? 5 : 0;
    TensorView xv{&x, DataType::kInt32, {1}, Device::Cpu()};
    s = rt.rank() == 0 ? p2p.Send(xv, 1, 1) : p2p.Recv(xv, 0, 1).status();
    if (!s.ok() || x != 5) return "after: " + s.ToString();
    return "";
  });
  CHECK(Joined(failures) == "");
}

TEST_CASE("Bad point-to-point arguments fail at once naming what was wrong", "[runtime][p2p]") {
  Watchdog watchdog("p2p bad arguments", std::chrono::seconds(60));
  LocalJob job(2);
  Runtime& rt = job.rank(0);
  PointToPoint p2p(rt);
  float x = 0;
  TensorView v{&x, DataType::kFloat32, {1}, Device::Cpu()};
  Status s = p2p.Send(v, 2, 0);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("send to rank 2 (tag 0): rank 2 is not a rank of this "
                                          "job (size 2)"));
  s = p2p.Send(v, 0, 0);
  CHECK_THAT(s.message(), Catch::Contains("the peer is this rank itself"));
  s = p2p.Recv(v, -3, 0).status();
  CHECK_THAT(s.message(), Catch::Contains("rank -3 is not a rank"));
  s = p2p.Send(v, kAnySource, 0);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  TensorView gpu{&x, DataType::kFloat32, {1}, Device::Cuda(0)};
  s = p2p.Send(gpu, 1, 0);
  CHECK_THAT(s.message(), Catch::Contains("kolo's point-to-point takes CPU tensors"));
  s = p2p.SendAsync(v, 1, 0, P2pOptions{}, nullptr);
  CHECK_THAT(s.message(), Catch::Contains("no callback"));
}

TEST_CASE("Callbacks run once on kolo's thread and may post the next op", "[runtime][p2p]") {
  Watchdog watchdog("p2p callbacks", std::chrono::seconds(60));
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    PointToPoint p2p(rt);
    std::atomic<int> calls{0};
    std::atomic<bool> refused{false};
    int32_t first = rt.rank() == 0 ? 1 : 0;
    int32_t second = rt.rank() == 0 ? 2 : 0;
    TensorView a{&first, DataType::kInt32, {1}, Device::Cpu()};
    TensorView b{&second, DataType::kInt32, {1}, Device::Cpu()};
    Callback then = [&](const Status& s) {
      if (s.ok()) calls++;
    };
    Callback chain = [&](const Status& s) {
      if (!s.ok()) return;
      calls++;
      // A blocking call would wait on this very thread: refused.
      refused = p2p.Send(a, 1 - rt.rank(), 99).code() == StatusCode::kFailedPrecondition;
      Status posted = rt.rank() == 0 ? p2p.SendAsync(b, 1, 2, {}, then)
                                     : p2p.RecvAsync(b, 0, 2, nullptr, {}, then);
      if (!posted.ok()) calls = -100;
    };
    Status s = rt.rank() == 0 ? p2p.SendAsync(a, 1, 1, {}, chain)
                              : p2p.RecvAsync(a, 0, 1, nullptr, {}, chain);
    if (!s.ok()) return s.ToString();
    const Clock::time_point start = Clock::now();
    while (calls.load() < 2 && SecondsSince(start) < 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (calls.load() != 2) return "callbacks ran " + std::to_string(calls.load()) + " times";
    if (!refused) return "a blocking send from a callback was not refused";
    if (first != 1 || second != 2)
      return "values " + std::to_string(first) + std::to_string(second);
    return "";
  });
  CHECK(Joined(failures) == "");
}

TEST_CASE("The timeline shows each op of the pair with its wait and its transfer",
          "[runtime][p2p][timeline]") {
  Watchdog watchdog("p2p timeline", std::chrono::seconds(60));
  const std::string path = "/tmp/kolo_p2p_timeline_" + std::to_string(::getpid()) + ".json";
  LocalJob job(2);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    Status s = rt.StartTimeline(path);
    if (!s.ok()) return s.ToString();
    PointToPoint p2p(rt);
    std::vector<float> data(100, 1.0f);
    TensorView v{data.data(), DataType::kFloat32, {100}, Device::Cpu()};
    s = rt.rank() == 0 ? p2p.Send(v, 1, 3) : p2p.Recv(v, 0, 3).status();
    if (!s.ok()) return s.ToString();
    s = rt.StopTimeline();
    return s.ok() ? "" : s.ToString();
  });
  REQUIRE(Joined(failures) == "");
  for (int r = 0; r < 2; ++r) {
    const std::string file = "/tmp/kolo_p2p_timeline_" + std::to_string(::getpid()) + ".rank" +
                             std::to_string(r) + ".json";
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::remove(file.c_str());
    const std::string track = r == 0 ? "send to rank 1 (tag 3)" : "recv from rank 0 (tag 3)";
    CHECK_THAT(text, Catch::Contains(track));
    CHECK_THAT(text, Catch::Contains(r == 0 ? "\"SEND\"" : "\"RECV\""));
    CHECK_THAT(text, Catch::Contains("WAIT_FOR_PEER"));
    CHECK_THAT(text, Catch::Contains("TRANSFER"));
  }
}

TEST_CASE("Many large sends in flight over TCP all complete, while more are posted",
          "[runtime][p2p]") {
  // The receiver pulls the first sends while the sender still posts the next ones, so DATA
  // leaves from the posting thread too.
  Watchdog watchdog("p2p window over TCP", std::chrono::seconds(60));
  LocalJob job(2, [](Options& o) { o.transport = Transport::kTcp; });
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    PointToPoint p2p(rt);
    P2pOptions options;
    options.timeout_seconds = 10;
    constexpr int kWindow = 16;
    std::vector<std::vector<int32_t>> buffers(kWindow, std::vector<int32_t>(1 << 20));
    std::vector<Handle> handles;
    for (int w = 0; w < kWindow; ++w) {
      std::vector<int32_t>& b = buffers[w];
      if (rt.rank() == 0) std::fill(b.begin(), b.end(), w);
      TensorView v{b.data(), DataType::kInt32, {1 << 20}, Device::Cpu()};
      StatusOr<Handle> h = rt.rank() == 0 ? p2p.SendAsync(v, 1, 4, options)
                                          : p2p.RecvAsync(v, 0, 4, nullptr, options);
      if (!h.ok()) return h.status().ToString();
      handles.push_back(*h);
      if (rt.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (Handle& h : handles) {
      Status s = h.Synchronize();
      if (!s.ok()) return s.ToString();
    }
    for (int w = 0; w < kWindow; ++w) {
      if (buffers[w] != std::vector<int32_t>(1 << 20, w)) return "window " + std::to_string(w);
    }
    return "";
  });
  CHECK(Joined(failures) == "");
}

// The shared-memory rings of same-host pairs (transport/p2p/p2p_ring.h): many messages in flight
// fill a ring and wrap around it; small ones (by the ring) and large ones (their OFFER by the
// ring, their bytes by the single copy or by DATA over the socket) keep their order.
TEST_CASE("Small and large sends in flight past a ring's size arrive in FIFO order",
          "[runtime][p2p][ring]") {
  const bool single_copy = GENERATE(true, false);
  Watchdog watchdog("p2p ring FIFO", std::chrono::seconds(120));
  LocalJob job(2, [single_copy](Options& o) {
    if (!single_copy) o.shm_single_copy = ShmSingleCopy::kOff;
  });
  // Element counts (int32): 1 B..200 KiB, every size class, ~1.3 MiB in all.
  const std::vector<int64_t> counts = {1,    1000, 5000, 1,     17000, 50000, 3,
                                       8191, 8192, 2,    16500, 700,   9000,  1};
  constexpr int kRounds = 6;
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    PointToPoint p2p(rt);
    std::vector<std::vector<int32_t>> buffers;
    for (int round = 0; round < kRounds; ++round) {
      for (size_t i = 0; i < counts.size(); ++i) {
        const int32_t value = rt.rank() == 0 ? static_cast<int32_t>(round * 100 + i) : -1;
        buffers.emplace_back(counts[i], value);
      }
    }
    std::vector<Handle> handles;
    for (auto& b : buffers) {
      TensorView v{b.data(), DataType::kInt32, {static_cast<int64_t>(b.size())}, Device::Cpu()};
      // Rank 0 posts every send before rank 1 posts a receive: they wait in the ring (full)
      // and, for the larger ones, as offers.
      StatusOr<Handle> h = rt.rank() == 0 ? p2p.SendAsync(v, 1, 8) : p2p.RecvAsync(v, 0, 8);
      if (!h.ok()) return h.status().ToString();
      handles.push_back(*h);
    }
    for (Handle& h : handles) {
      Status s = h.Synchronize();
      if (!s.ok()) return s.ToString();
    }
    if (rt.rank() == 0) return "";
    for (size_t k = 0; k < buffers.size(); ++k) {
      const auto want = static_cast<int32_t>((k / counts.size()) * 100 + k % counts.size());
      for (int32_t got : buffers[k]) {
        if (got != want) return "message " + std::to_string(k) + ": " + std::to_string(got);
      }
    }
    return "";
  });
  CHECK(Joined(failures) == "");
}

// A receiver that posts its receive and does not wait in kolo: its lane thread sleeps in poll()
// on the socket and said so in the ring; the sender's doorbell wakes it. Without the doorbell
// each message would wait for the lane thread's 100 ms tick.
TEST_CASE("A receiver whose lane thread sleeps is woken by the sender's doorbell",
          "[runtime][p2p][ring]") {
  Watchdog watchdog("p2p sleeping reader", std::chrono::seconds(60));
  LocalJob job(2);
  constexpr int kRounds = 30;
  std::atomic<int> posted{0};
  const Clock::time_point start = Clock::now();
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    PointToPoint p2p(rt);
    for (int round = 1; round <= kRounds; ++round) {
      int32_t value = rt.rank() == 0 ? round : 0;
      TensorView v{&value, DataType::kInt32, {1}, Device::Cpu()};
      if (rt.rank() == 0) {
        while (posted.load() < round) std::this_thread::yield();
        // Not synchronisation: the time for rank 1's lane thread to go to sleep, which this
        // case is about.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        Status s = p2p.Send(v, 1, 4);
        if (!s.ok()) return s.ToString();
        continue;
      }
      std::promise<Status> done;
      Status s =
          p2p.RecvAsync(v, 0, 4, nullptr, {}, [&done](const Status& st) { done.set_value(st); });
      if (!s.ok()) return s.ToString();
      posted = round;
      std::future<Status> result = done.get_future();  // waits without driving kolo
      if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        return "round " + std::to_string(round) + ": not received";
      }
      s = result.get();
      if (!s.ok() || value != round) return s.ToString() + " " + std::to_string(value);
    }
    return "";
  });
  CHECK(Joined(failures) == "");
  // 30 rounds of 2 ms and a wake-up each; without the doorbell 30 x 100 ms.
  CHECK(SecondsSince(start) < 1.5);
}
