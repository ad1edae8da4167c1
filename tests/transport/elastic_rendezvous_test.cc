// The elastic rendezvous over real gRPC on 127.0.0.1 (transport/grpc/elastic_rendezvous.h):
// workers join generations of kolorun's real ElasticMembership through it and poll host
// changes; a caller without the job secret, of another job, or replaying a recorded call is
// refused before the membership hears of it; a driver that is gone fails the call within its
// deadline. Raw gRPC stubs play the attackers. Every test arms a Watchdog.
#include "transport/grpc/elastic_rendezvous.h"

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <thread>

#include "kolo/elastic.h"
#include "launcher/elastic_membership.h"
#include "proto/kolo.grpc.pb.h"
#include "tests/support/seconds_since.h"
#include "tests/support/watchdog.h"
#include "transport/grpc/elastic_envelope.h"

namespace kolo::transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using kolo::testing::SecondsSince;
using kolo::testing::Watchdog;

const JobCredentials kCreds{"0123456789abcdef0123456789abcdef", "kolorun-elastic-test"};

struct Driver {
  Driver() : membership(Config()) {
    membership.UpdateHosts({launcher::Host{"a", "", 2}}, Clock::now());
    membership.TakeSlotsToFill(Clock::now());  // workers a:0 and a:1
    auto started = ElasticRendezvousServer::Start("127.0.0.1:0", kCreds, &membership);
    REQUIRE(started.ok());
    server = std::move(*started);
  }
  static launcher::ElasticMembership::Config Config() {
    launcher::ElasticMembership::Config config;
    config.initial_np = 2;
    config.min_np = 2;
    config.max_np = 2;
    config.job_id = kCreds.job_id;
    return config;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server->port()); }

  launcher::ElasticMembership membership;
  std::unique_ptr<ElasticRendezvousServer> server;
};

TEST_CASE("Workers join a generation and poll host changes through the sealed rendezvous",
          "[transport][elastic]") {
  Watchdog watchdog("elastic rendezvous join", 30s);
  Driver driver;
  ElasticRendezvousClient first(driver.address(), kCreds);
  ElasticRendezvousClient second(driver.address(), kCreds);
  StatusOr<ElasticAssignment> one = Unavailable("not called");
  std::thread waiting([&] { one = first.Join({"a:1", 0, 4001}, Clock::now() + 10s); });
  // The first call waits in the driver (up to kJoinAnswerWait) or comes back pending.
  StatusOr<ElasticAssignment> zero = second.Join({"a:0", 0, 4000}, Clock::now() + 10s);
  waiting.join();
  REQUIRE(zero.ok());
  REQUIRE(one.ok());
  if (one->outcome == ElasticOutcome::kPending)
    one = first.Join({"a:1", 0, 4001}, Clock::now() + 10s);
  REQUIRE(one->outcome == ElasticOutcome::kAssigned);
  REQUIRE(zero->outcome == ElasticOutcome::kAssigned);
  CHECK(zero->rank == 0);
  CHECK(one->rank == 1);
  CHECK(one->size == 2);
  CHECK(one->generation == 1);
  CHECK(one->controller_address == "a:4000");
  CHECK(one->job_id == "kolorun-elastic-test.g1");
  CHECK(one->hostname == "a");

  // Host a loses a slot: worker a:1 is to stop, and rank 0 hears of the removal and the loss.
  driver.membership.UpdateHosts({launcher::Host{"a", "", 1}}, Clock::now());
  StatusOr<ElasticHostChanges> changes =
      second.Poll("a:0", zero->hosts_timestamp, 1, Clock::now() + 5s);
  REQUIRE(changes.ok());
  CHECK(changes->kinds == elastic::kHostsRemoved);
  CHECK(changes->timestamp > zero->hosts_timestamp);
  CHECK(changes->lost_member == "worker a:1 (rank 1) is being stopped");
  CHECK(changes->lost_rank == 1);
}

TEST_CASE("A rendezvous caller without the job's secret or id is refused, and so is its driver",
          "[transport][elastic][security]") {
  Watchdog watchdog("elastic rendezvous refusals", 30s);
  Driver driver;
  ElasticRendezvousClient stranger(driver.address(),
                                   {"fedcba9876543210fedcba9876543210", kCreds.job_id});
  StatusOr<ElasticAssignment> refused = stranger.Join({"a:0", 0, 4000}, Clock::now() + 5s);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message().find("elastic rendezvous call does not prove the job secret") !=
        std::string::npos);
  ElasticRendezvousClient other_job(driver.address(), {kCreds.key, "another-job"});
  CHECK_FALSE(other_job.Poll("a:0", 0, 0, Clock::now() + 5s).ok());
  // The refused Join never reached the membership: a:0 is not waiting, so a:1 alone is pending.
  ElasticRendezvousClient honest(driver.address(), kCreds);
  StatusOr<ElasticAssignment> alone = honest.Join({"a:1", 0, 4001}, Clock::now() + 5s);
  REQUIRE(alone.ok());
  CHECK(alone->outcome == ElasticOutcome::kPending);
}

TEST_CASE("A recorded rendezvous call replayed to the driver is refused",
          "[transport][elastic][security]") {
  Watchdog watchdog("elastic rendezvous replay", 30s);
  Driver driver;
  auto stub = wire::ElasticRendezvous::NewStub(
      grpc::CreateChannel(driver.address(), grpc::InsecureChannelCredentials()));
  wire::ElasticPollRequest poll;
  poll.set_worker_id("a:0");
  StatusOr<std::string> nonce = RandomBytes(kNonceBytes);
  REQUIRE(nonce.ok());
  const SealedMessage sealed =
      Seal(kCreds, ElasticCall::kPoll, ElasticDirection::kCall, poll.SerializeAsString(), *nonce);
  wire::ElasticEnvelope call;
  call.set_body(sealed.body);
  call.set_nonce(sealed.nonce);
  call.set_proof(sealed.proof);
  for (int attempt = 0; attempt < 2; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    wire::ElasticEnvelope answer;
    grpc::Status status = stub->Poll(&context, call, &answer);
    if (attempt == 0) {
      CHECK(status.ok());
      CHECK(CheckSeal(kCreds, ElasticCall::kPoll, ElasticDirection::kAnswer,
                      {answer.body(), answer.nonce(), answer.proof()})
                .ok());
      // A Join's seal is not valid for a Poll, nor a call's for an answer.
      CHECK_FALSE(CheckSeal(kCreds, ElasticCall::kJoin, ElasticDirection::kAnswer,
                            {answer.body(), answer.nonce(), answer.proof()})
                      .ok());
    } else {
      CHECK(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
      CHECK(status.error_message() ==
            "elastic rendezvous call replayed (its nonce was used before)");
    }
  }
}

TEST_CASE("A rendezvous call to a driver that is gone fails by its deadline",
          "[transport][elastic][fault]") {
  Watchdog watchdog("elastic rendezvous gone", 30s);
  std::string address;
  {
    Driver driver;
    address = driver.address();
  }
  ElasticRendezvousClient client(address, kCreds);
  const auto start = Clock::now();
  StatusOr<ElasticAssignment> gone = client.Join({"a:0", 0, 4000}, Clock::now() + 1s);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.status().code() == StatusCode::kUnavailable);
  CHECK(gone.status().message().find("no answer from kolorun's elastic driver in time") !=
        std::string::npos);
  CHECK(SecondsSince(start) < 5);
}

}  // namespace
}  // namespace kolo::transport
