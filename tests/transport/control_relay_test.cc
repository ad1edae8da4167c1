// Control relays (transport/grpc/control_relay.h) with rank 0's real Controller behind the real
// GrpcControlServer and real GrpcControlChannels on 127.0.0.1, four ranks: the responses every
// rank gets through relays equal the direct path's, step after step (full metadata, a shape
// mismatch's error, cached ids); a member that leaves without a shutdown notice is reported by
// its relay and aborts the job naming it; a relay whose process dies (SIGKILL) loses its
// members, with messages naming the relay on both sides. Each test has a watchdog; the fault
// tests assert their time bound.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/controller.h"
#include "core/clock.h"
#include "core/logging.h"
#include "kolo/options.h"
#include "tests/support/child_process.h"
#include "tests/support/watchdog.h"
#include "tests/transport/control_test_handler.h"
#include "tests/transport/relay_test_options.h"
#include "transport/grpc/grpc_control_channel.h"
#include "transport/grpc/grpc_control_server.h"

namespace kolo::transport::testing {
namespace {

using namespace std::chrono_literals;
using kolo::testing::ChildProcess;
using kolo::testing::Watchdog;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 4;

// rank 0's controller and server, the relays in this process, one channel per rank.
struct RelayTestJob {
  explicit RelayTestJob(int size) : logger(MakeLogger(0, "relay-test", spdlog::level::err)) {
    options.size = size;
    options.cycle_time_ms = 1;
    options.timeout_seconds = kRelayTimeoutSeconds;
    options.start_timeout_seconds = kRelayTimeoutSeconds;
    controller =
        std::make_unique<controller::Controller>(options, nullptr, SteadyClock::Get(), logger);
    auto started = GrpcControlServer::Start("127.0.0.1:0", controller.get(), kRelayTimeoutSeconds,
                                            logger, RelayTestSecurity(), size);
    REQUIRE(started.ok());
    server = std::move(started).value();
    controller->Attach(server.get());
    controller->Start();
    for (int r = 0; r < size; ++r) wakers.push_back(std::make_unique<Waker>());
  }
  ~RelayTestJob() {
    const auto soon = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (auto& channel : channels) {
      if (channel != nullptr) channel->Close(soon);
    }
    for (auto& relay : relays) relay->Stop(soon);
    server->Stop(soon);
    controller->Stop();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server->port()); }

  // An in-process relay for ranks first..first + members - 1; returns its address.
  std::string AddRelay(int first, int members) {
    auto relay = ControlRelay::Start(RelayOptionsFor(address(), first, members, options.size),
                                     std::chrono::steady_clock::now() + std::chrono::seconds(5));
    REQUIRE(relay.ok());
    relays.push_back(std::move(relay).value());
    return "127.0.0.1:" + std::to_string(relays.back()->port());
  }

  // Every rank connects to `address_of[rank]` at once; fails the test unless all are welcomed.
  void Connect(const std::vector<std::string>& address_of) {
    channels.resize(address_of.size());
    std::vector<Status> results(address_of.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < address_of.size(); ++r) {
      threads.emplace_back([&, r] {
        channels[r] = GrpcControlChannel::Create(address_of[r], kRelayTimeoutSeconds, logger,
                                                 RelayTestSecurity());
        Hello hello{static_cast<int>(r), static_cast<int>(address_of.size()),
                    "host-" + std::to_string(r), "127.0.0.1:" + std::to_string(30000 + r)};
        results[r] =
            channels[r]
                ->Connect(hello, std::chrono::steady_clock::now() + std::chrono::seconds(5),
                          wakers[r]->Function())
                .status();
      });
    }
    for (auto& thread : threads) thread.join();
    for (size_t r = 0; r < results.size(); ++r) {
      INFO("rank " << r << ": " << results[r].message());
      REQUIRE(results[r].ok());
    }
  }

  Options options;
  Logger logger;
  std::unique_ptr<controller::Controller> controller;
  std::unique_ptr<GrpcControlServer> server;
  std::vector<std::unique_ptr<ControlRelay>> relays;
  std::vector<std::unique_ptr<GrpcControlChannel>> channels;  // by rank
  std::vector<std::unique_ptr<Waker>> wakers;                 // by rank
};

// Each rank's outcome of each tensor in `steps` steps: "a", "b" every step (by cache id once
// the controller gave one), "c" in the first only, with rank 3's of another shape (an error
// for every rank). One line per tensor and step, sorted within a step. Requires that every
// rank got the same.
std::vector<std::string> RunSteps(RelayTestJob& job, int steps) {
  std::vector<std::map<std::string, uint32_t>> ids(kRanks);
  std::vector<std::string> lines[kRanks];
  for (int step = 0; step < steps; ++step) {
    const std::vector<std::string> names =
        step == 0 ? std::vector<std::string>{"a", "b", "c"} : std::vector<std::string>{"a", "b"};
    for (int r = 0; r < kRanks; ++r) {
      WorkerMessage batch;
      batch.kind = WorkerMessage::Kind::kRequests;
      for (const std::string& name : names) {
        Request request;
        request.cache_id = ids[r][name];
        if (request.cache_id == 0) {
          request.meta.name = name;
          request.meta.op = OpType::kAllreduce;
          request.meta.dtype = DataType::kFloat32;
          request.meta.shape = {name == "c" && r == 3 ? 5 : 4};
        }
        batch.requests.push_back(request);
      }
      REQUIRE(job.channels[r]->Send(batch).ok());
    }
    for (int r = 0; r < kRanks; ++r) {
      std::map<std::string, std::string> seen;
      while (seen.size() < names.size()) {
        auto next = job.wakers[r]->Receive(*job.channels[r], 5000ms);
        INFO("rank " << r << " step " << step);
        REQUIRE(next.ok());
        REQUIRE(next->has_value());
        const ControllerMessage& message = **next;
        if (message.kind != ControllerMessage::Kind::kResponses) continue;
        for (const Response& response : message.responses) {
          for (size_t i = 0; i < response.names.size(); ++i) {
            const std::string& name = response.names[i];
            const uint32_t id = i < response.cache_ids.size() ? response.cache_ids[i] : 0;
            if (id != 0) ids[r][name] = id;
            seen[name] =
                std::to_string(step) + " " + name + " op " +
                std::to_string(static_cast<int>(response.op)) + " elements " +
                std::to_string(i < response.num_elements.size() ? response.num_elements[i] : -1) +
                " id " + std::to_string(id) + " error '" + response.error + "'";
          }
        }
      }
      for (const auto& [name, line] : seen) lines[r].push_back(line);
    }
  }
  for (int r = 1; r < kRanks; ++r) CHECK(lines[r] == lines[0]);
  return lines[0];
}

void ShutDown(RelayTestJob& job) {
  for (int r = 0; r < kRanks; ++r) {
    WorkerMessage notice;
    notice.kind = WorkerMessage::Kind::kShutdown;
    REQUIRE(job.channels[r]->Send(notice).ok());
  }
  for (int r = 0; r < kRanks; ++r) {
    for (;;) {
      auto next = job.wakers[r]->Receive(*job.channels[r], 5000ms);
      REQUIRE(next.ok());
      REQUIRE(next->has_value());
      if ((*next)->kind == ControllerMessage::Kind::kShutdown) break;
    }
    job.channels[r]->Close(Clock::now() + 2s);
  }
}

// The first Abort `rank` receives within `limit` (a failure if none), its reason.
std::string AbortOf(RelayTestJob& job, int rank, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto next = job.wakers[rank]->Receive(*job.channels[rank], std::max(left, 1ms));
    if (!next.ok()) return "lost: " + next.status().message();
    INFO("rank " << rank);
    REQUIRE(next->has_value());
    if ((*next)->kind == ControllerMessage::Kind::kAbort) return (*next)->reason;
  }
}

TEST_CASE("Responses through control relays equal the direct path's", "[transport][relay]") {
  Watchdog watchdog("relay results", 20s);
  std::vector<std::string> direct;
  {
    RelayTestJob job(kRanks);
    job.Connect(std::vector<std::string>(kRanks, job.address()));
    direct = RunSteps(job, 3);
    ShutDown(job);
  }
  RelayTestJob job(kRanks);
  const std::string first = job.AddRelay(0, 2);
  const std::string second = job.AddRelay(2, 2);
  job.Connect({first, first, second, second});
  const std::vector<std::string> relayed = RunSteps(job, 3);
  ShutDown(job);
  REQUIRE(direct.size() == 7);  // a, b, c; a, b; a, b
  CHECK(direct[2].find("Mismatched") != std::string::npos);
  CHECK(relayed == direct);
}

TEST_CASE("A member the controller refuses gets the refusal alone, and the relay serves on",
          "[transport][relay]") {
  Watchdog watchdog("relay refusal", 20s);
  RelayTestJob job(kRanks);
  const std::string relay = job.AddRelay(2, 2);
  {
    auto refused =
        GrpcControlChannel::Create(relay, kRelayTimeoutSeconds, job.logger, RelayTestSecurity());
    Hello hello{3, kRanks, "host-3", "127.0.0.1:30003"};
    hello.protocol = kProtocolVersion + 1;
    Waker waker;
    const Status status = refused->Connect(hello, Clock::now() + 5s, waker.Function()).status();
    INFO(status.message());
    CHECK_FALSE(status.ok());
    CHECK(status.message().find("protocol " + std::to_string(kProtocolVersion + 1)) !=
          std::string::npos);
    refused->Close(Clock::now());  // its end reaches the controller through the relay too
  }
  job.Connect({job.address(), job.address(), relay, relay});
  CHECK(RunSteps(job, 2).size() == 5);
  ShutDown(job);
}

TEST_CASE("A member that leaves its relay without a shutdown notice aborts the job, named",
          "[transport][relay][fault]") {
  Watchdog watchdog("relay member lost", 20s);
  RelayTestJob job(kRanks);
  const std::string first = job.AddRelay(0, 2);
  const std::string second = job.AddRelay(2, 2);
  job.Connect({first, first, second, second});
  RunSteps(job, 1);
  const auto start = Clock::now();
  job.channels[3]->Close(Clock::now());  // no shutdown notice: its stream is cancelled
  for (int r = 0; r < 3; ++r) {
    const std::string reason = AbortOf(job, r, 3000ms);
    INFO("rank " << r << ": " << reason);
    CHECK(reason.find("rank 3 lost") != std::string::npos);
    CHECK(reason.find("control relay hosted by rank 2") != std::string::npos);
  }
  CHECK(Clock::now() - start < 3s);
}

TEST_CASE("A relay whose process dies loses its members, named on both sides",
          "[transport][relay][fault]") {
  Watchdog watchdog("relay lost", 20s);
  RelayTestJob job(kRanks);
  ChildProcess peer({KOLO_RELAY_PEER_PATH, job.address(), "2", "2", std::to_string(kRanks)}, {},
                    ChildProcess::Stdin::kPipe);
  const std::string port = peer.ReadLine(5000ms);
  INFO("relay_peer said '" << port << "'; stderr: " << peer.StderrSoFar());
  REQUIRE(port.rfind("PORT ", 0) == 0);
  const std::string relay = "127.0.0.1:" + port.substr(5);
  job.Connect({job.address(), job.address(), relay, relay});
  RunSteps(job, 1);
  const auto start = Clock::now();
  peer.Signal(SIGKILL);
  for (int r = 0; r < 2; ++r) {  // direct: the controller's verdict
    const std::string reason = AbortOf(job, r, 3000ms);
    INFO("rank " << r << ": " << reason);
    CHECK(reason.find("lost: its control relay hosted by rank 2") != std::string::npos);
  }
  for (int r = 2; r < kRanks; ++r) {  // the relay's members: their stream to it broke
    const std::string reason = AbortOf(job, r, 3000ms);
    INFO("rank " << r << ": " << reason);
    CHECK(reason.find("lost") != std::string::npos);
    CHECK(reason.find(relay) != std::string::npos);
  }
  CHECK(Clock::now() - start < 3s);
}

}  // namespace
}  // namespace kolo::transport::testing
