#include "controller/rendezvous.h"

#include <catch2/catch.hpp>

namespace kolo::controller {
namespace {

Hello MakeHello(int rank, int size) {
  Hello hello;
  hello.rank = rank;
  hello.size = size;
  hello.host = "host" + std::to_string(rank);
  hello.data_address = "10.0.0.1:" + std::to_string(5000 + rank);
  hello.machine = "boot/" + std::to_string(rank % 2);
  return hello;
}

TEST_CASE("The peer table is complete once every rank is admitted", "[controller][rendezvous]") {
  const int size = GENERATE(1, 3, 8);
  Rendezvous rendezvous(size);
  for (int rank = size - 1; rank >= 0; --rank) {
    CHECK_FALSE(rendezvous.complete());
    REQUIRE(rendezvous.Admit(MakeHello(rank, size)).ok());
    CHECK(rendezvous.admitted(rank));
  }
  CHECK(rendezvous.complete());
  for (int rank = 0; rank < size; ++rank) {
    const PeerInfo& peer = rendezvous.peers()[rank];
    CHECK(peer.rank == rank);
    CHECK(peer.host == "host" + std::to_string(rank));
    CHECK(peer.data_address == "10.0.0.1:" + std::to_string(5000 + rank));
    CHECK(peer.machine == "boot/" + std::to_string(rank % 2));
  }
}

TEST_CASE("Bad hellos are refused with a message and change nothing", "[controller][rendezvous]") {
  Rendezvous rendezvous(4);
  REQUIRE(rendezvous.Admit(MakeHello(2, 4)).ok());
  CHECK(rendezvous.Admit(MakeHello(4, 4)).message() ==
        "rank 4 is out of range for a job of 4 ranks");
  CHECK(rendezvous.Admit(MakeHello(-1, 4)).message() ==
        "rank -1 is out of range for a job of 4 ranks");
  CHECK(rendezvous.Admit(MakeHello(1, 8)).message() ==
        "rank 1 says the job has 8 ranks; the controller was started for 4");
  Status duplicate = rendezvous.Admit(MakeHello(2, 4));
  CHECK(duplicate.code() == StatusCode::kInvalidArgument);
  CHECK(duplicate.message() == "rank 2 is already connected");
  CHECK_FALSE(rendezvous.admitted(3));
  CHECK_FALSE(rendezvous.admitted(1));
  CHECK(rendezvous.peers()[3].rank == -1);
}

TEST_CASE("A rank of another kolo version is refused, both versions named",
          "[controller][rendezvous]") {
  Rendezvous rendezvous(2);
  Hello newer = MakeHello(1, 2);
  newer.protocol = kProtocolVersion + 1;
  newer.kolo_version = "9.9.9";
  Status refused = rendezvous.Admit(newer);
  CHECK(refused.code() == StatusCode::kFailedPrecondition);
  CHECK(refused.message() == "rank 1 runs kolo 9.9.9, protocol " +
                                 std::to_string(kProtocolVersion + 1) + "; rank 0 runs kolo " +
                                 KOLO_VERSION_STRING + ", protocol " +
                                 std::to_string(kProtocolVersion) +
                                 ": every rank of a job must run the same kolo version");
  Hello older = MakeHello(1, 2);
  older.protocol = 0;  // what a kolo without the field sends
  older.kolo_version.clear();
  CHECK_THAT(rendezvous.Admit(older).message(),
             Catch::StartsWith("rank 1 runs a kolo before 0.2; rank 0 runs kolo "));
  CHECK_FALSE(rendezvous.admitted(1));
  CHECK(rendezvous.Admit(MakeHello(1, 2)).ok());  // the right build still gets in
}

TEST_CASE("A refused hello leaves its rank free for the real one", "[controller][rendezvous]") {
  Rendezvous rendezvous(2);
  CHECK_FALSE(rendezvous.Admit(MakeHello(5, 2)).ok());
  CHECK_FALSE(rendezvous.Admit(MakeHello(1, 3)).ok());
  CHECK_FALSE(rendezvous.admitted(1));
  CHECK(rendezvous.Admit(MakeHello(0, 2)).ok());
  CHECK(rendezvous.Admit(MakeHello(1, 2)).ok());
  CHECK(rendezvous.complete());
}

}  // namespace
}  // namespace kolo::controller
