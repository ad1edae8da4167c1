// PlanControlRelay (runtime/control_relays.h): where a rank's control stream goes under
// KOLO_CONTROL_RELAYS, decided from its rank, KOLO_LOCAL_RANK and KOLO_LOCAL_SIZE alone.
#include "runtime/control_relays.h"

#include <catch2/catch.hpp>
#include <string>

namespace {

kolo::Options RankOptions(int rank, int size, int local_rank, int local_size,
                          const std::string& relays = "host") {
  kolo::Options options;
  options.rank = rank;
  options.size = size;
  options.local_rank = local_rank;
  options.local_size = local_size;
  options.job_id = "job-1";
  options.control_relays = relays;
  return options;
}

const std::string kController = "10.0.0.1:29500";

}  // namespace

TEST_CASE("off: every rank connects to the controller, saying nothing", "[runtime][relay]") {
  const kolo::RelayPlan plan = kolo::PlanControlRelay(RankOptions(5, 8, 1, 4, "off"), kController);
  CHECK_FALSE(plan.relayed);
  CHECK(plan.direct_reason.empty());
}

TEST_CASE("host: a host's ranks share the relay its first rank runs", "[runtime][relay]") {
  // Two hosts of four: ranks 4..7 on the second.
  const kolo::RelayPlan first = kolo::PlanControlRelay(RankOptions(4, 8, 0, 4), kController);
  const kolo::RelayPlan last = kolo::PlanControlRelay(RankOptions(7, 8, 3, 4), kController);
  CHECK(first.relayed);
  CHECK(first.hosts_relay);
  CHECK(last.relayed);
  CHECK_FALSE(last.hosts_relay);
  CHECK(first.host_rank == 4);
  CHECK(last.host_rank == 4);
  CHECK(first.members == 4);
  CHECK(first.address == last.address);
  CHECK(first.address.rfind("unix-abstract:kolo-", 0) == 0);
  CHECK(first.address.find("control-relay-of-rank-4") != std::string::npos);
  CHECK(last.Describe().find("run by rank 4") != std::string::npos);
  // Another job (id or controller) on the same machine names another socket.
  kolo::Options other = RankOptions(4, 8, 0, 4);
  other.job_id = "job-2";
  CHECK(kolo::PlanControlRelay(other, kController).address != first.address);
  CHECK(kolo::PlanControlRelay(RankOptions(4, 8, 0, 4), "10.0.0.1:29501").address != first.address);
}

TEST_CASE("host: rank 0's host and hosts of one rank connect directly, quietly",
          "[runtime][relay]") {
  const kolo::RelayPlan zero = kolo::PlanControlRelay(RankOptions(3, 8, 3, 4), kController);
  CHECK_FALSE(zero.relayed);
  CHECK(zero.direct_reason.empty());
  const kolo::RelayPlan alone = kolo::PlanControlRelay(RankOptions(2, 4, 0, 1), kController);
  CHECK_FALSE(alone.relayed);
  CHECK(alone.direct_reason.empty());
}

TEST_CASE(
    "host: without a place on the host, with TLS, or with ranks that cannot be "
    "consecutive, ranks connect directly and say why",
    "[runtime][relay]") {
  const kolo::RelayPlan unknown = kolo::PlanControlRelay(RankOptions(5, 8, -1, -1), kController);
  CHECK_FALSE(unknown.relayed);
  CHECK(unknown.direct_reason.find("KOLO_LOCAL_RANK") != std::string::npos);
  kolo::Options tls = RankOptions(5, 8, 1, 4);
  tls.tls_ca = "/etc/ca.pem";
  const kolo::RelayPlan with_tls = kolo::PlanControlRelay(tls, kController);
  CHECK_FALSE(with_tls.relayed);
  CHECK(with_tls.direct_reason.find("TLS") != std::string::npos);
  // Rank 1 as local rank 2 of 3 (interleaved placement): its first rank would be -1.
  const kolo::RelayPlan interleaved = kolo::PlanControlRelay(RankOptions(1, 6, 2, 3), kController);
  CHECK_FALSE(interleaved.relayed);
  CHECK(interleaved.direct_reason.find("consecutive") != std::string::npos);
  // Rank 6 of 8 as local rank 0 of 4: its host would run past the job's last rank.
  const kolo::RelayPlan past = kolo::PlanControlRelay(RankOptions(6, 8, 0, 4), kController);
  CHECK_FALSE(past.relayed);
  CHECK(past.direct_reason.find("consecutive") != std::string::npos);
}
