// FastPath's joins and ends, as plain data (tests/core/fast_path_job.h): a joined rank's
// stand-ins, joins and removals held until the rank's own ops are decided, shutdown() and a
// quiet rank that answers its peers' rounds late with its own op.
#include <catch2/catch.hpp>
#include <vector>

#include "core/loop/fast_path.h"
#include "tests/core/fast_path_job.h"

using namespace kolo;
using namespace kolo::testing;
using namespace std::chrono_literals;

TEST_CASE("A joined rank runs the others' cached allreduces with zeros (a null entry)",
          "[core][fastpath]") {
  const int size = GENERATE(3, 10);
  Job job(size);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(6, w);
  CHECK_FALSE(job.Join(2));  // nothing of its own waits: the join goes on to the controller
  TensorEntry* on0 = job.Submit(0, 6, w);
  for (int r = 1; r < size; ++r) {
    if (r != 2) job.Submit(r, 6, w);
  }
  job.Settle();
  std::vector<FastPath::Work> works0 = job.Drain(0);
  std::vector<FastPath::Work> works2 = job.Drain(2);
  REQUIRE(works0.size() == 1);
  REQUIRE(works2.size() == 1);
  CHECK(works0[0].entries == std::vector<TensorEntry*>{on0});
  CHECK(works2[0].entries == std::vector<TensorEntry*>{nullptr});
  CHECK(works2[0].response.names == std::vector<std::string>{"grad/w"});
}

TEST_CASE(
    "A joined rank stands in for allreduces only: another op waits for it, then goes to the "
    "controller, and a joined rank's own goes there at once",
    "[core][fastpath]") {
  const int size = GENERATE(3, 10);
  Job job(size);
  const uint32_t cast_id = 7 | kEveryRankCacheIdBit;
  const FastSpec cast = BroadcastSpec("cast", 4, 0);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(6, w);
  job.LearnEverywhere(cast_id, cast);
  CHECK_FALSE(job.Join(2));
  CHECK_FALSE(job.Offers(2, cast_id, cast));  // the controller names the join
  for (int r = 0; r < size; ++r) {
    if (r == 2) continue;
    job.Submit(r, 6, w);
    job.Submit(r, cast_id, cast);
  }
  job.Settle();
  for (int r = 0; r < size; ++r) {
    std::vector<FastPath::Work> works = job.Drain(r);
    REQUIRE(works.size() == 1);  // the allreduce, rank 2 with zeros; not the broadcast
    CHECK(works[0].response.names == std::vector<std::string>{"grad/w"});
  }
  job.clock().Advance(1s);
  job.Settle();
  for (int r = 0; r < size; ++r) {
    if (r == 2) continue;
    CHECK(job.to_controller(r) == std::vector<uint32_t>{cast_id});
  }
}

TEST_CASE(
    "A rank that joins after offering a broadcast still runs it on the fast path with the "
    "others",
    "[core][fastpath]") {
  Job job(3);
  const uint32_t cast_id = 1 | kEveryRankCacheIdBit;
  const FastSpec cast = BroadcastSpec("cast", 4, 1);
  job.LearnEverywhere(cast_id, cast);
  job.LearnEverywhere(2, Spec("grad/w", 4));
  TensorEntry* on0 = job.Submit(0, cast_id, cast);
  TensorEntry join;
  join.meta.op = OpType::kJoin;
  REQUIRE(job.at(0).Offer(&join, 0, job.clock().Now()));  // held behind the broadcast
  job.Submit(1, cast_id, cast);
  job.Submit(2, cast_id, cast);
  job.Submit(1, 2, Spec("grad/w", 4));
  job.Submit(2, 2, Spec("grad/w", 4));
  job.Settle();
  std::vector<FastPath::Work> works = job.Drain(0);
  REQUIRE(works.size() == 2);
  CHECK(works[0].entries == std::vector<TensorEntry*>{nullptr});  // grad/w: zeros
  CHECK(works[1].entries == std::vector<TensorEntry*>{on0});      // its own broadcast
  CHECK(job.at(0).TakeReleased() == &join);
}

TEST_CASE("A join waits for the rank's own cached allreduces to be decided", "[core][fastpath]") {
  Job job(2);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(2, w);
  job.Submit(0, 2, w);
  TensorEntry join;
  join.meta.op = OpType::kJoin;
  REQUIRE(job.at(0).Offer(&join, 0, job.clock().Now()));
  CHECK(job.at(0).TakeReleased() == nullptr);
  job.Submit(1, 2, w);
  job.Settle();
  CHECK(job.at(0).TakeReleased() == &join);
  CHECK(job.at(0).TakeReleased() == nullptr);
  CHECK_FALSE(job.at(1).Offer(&join, 0, job.clock().Now()));  // nothing of rank 1's waits
}

TEST_CASE("Joins and removals held together all go, in the order they were held",
          "[core][fastpath][process_sets]") {
  Job job(2);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(2, w);
  job.Submit(0, 2, w);
  TensorEntry join_a, join_b, removal;
  join_a.meta.op = join_b.meta.op = OpType::kJoin;
  join_a.meta.process_set = 1;  // joins of two sets at once
  join_b.meta.process_set = 2;
  removal.meta.op = OpType::kRemoveProcessSet;
  removal.meta.root = 7;  // nothing of set 7 waits, but it stays behind the joins
  REQUIRE(job.at(0).Offer(&join_a, 0, job.clock().Now()));
  REQUIRE(job.at(0).Offer(&join_b, 0, job.clock().Now()));
  REQUIRE(job.at(0).Offer(&removal, 0, job.clock().Now()));
  CHECK(job.at(0).TakeReleased() == nullptr);
  job.Submit(1, 2, w);
  job.Settle();
  CHECK(job.at(0).TakeReleased() == &join_a);
  CHECK(job.at(0).TakeReleased() == &join_b);
  CHECK(job.at(0).TakeReleased() == &removal);
  CHECK(job.at(0).TakeReleased() == nullptr);
}

TEST_CASE(
    "After shutdown() nothing takes the path, waiting tensors leave it, and the rank "
    "settles once its stopping round was answered",
    "[core][fastpath]") {
  Job job(2);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(1, w);
  job.LearnEverywhere(2, Spec("grad/b", 4));
  job.Submit(0, 1, w);
  job.at(0).SetStopping();
  CHECK_FALSE(job.at(0).Settled());
  TensorEntry other;
  other.meta.name = "grad/b";
  other.meta.shape = {4};
  CHECK_FALSE(job.at(0).Offer(&other, 2, job.clock().Now()));
  job.Settle();
  CHECK(job.to_controller(0) == std::vector<uint32_t>{1});
  CHECK(job.at(0).Settled());
  // The peer learnt that a rank stops: it too sends everything to the controller now.
  CHECK_FALSE(job.at(1).Offer(&other, 2, job.clock().Now()));
}

TEST_CASE(
    "A rank is quiet while nothing of its own needs a round, even with a peer's round "
    "unanswered, and its later answer carries its op: one round",
    "[core][fastpath]") {
  Job job(2);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(3, w);
  CHECK(job.at(0).Quiet());
  CHECK(job.at(1).Quiet());
  job.Submit(0, 3, w);
  CHECK_FALSE(job.at(0).Quiet());  // a round is due
  FastPath::Outbox out;
  REQUIRE(job.at(0).Advance(job.clock().Now(), &out).ok());
  REQUIRE(out.round);
  CHECK_FALSE(job.at(0).Quiet());  // its round is open
  REQUIRE(job.at(1).ReceiveRound(0, *out.round, job.clock().Now()).ok());
  // Rank 1 owes an answer but has nothing that needs one: the loop need not wake for rounds.
  CHECK(job.at(1).Quiet());
  job.Submit(1, 3, w);
  CHECK_FALSE(job.at(1).Quiet());
  job.Settle();
  for (int r = 0; r < 2; ++r) {
    std::vector<FastPath::Work> works = job.Drain(r);
    REQUIRE(works.size() == 1);
    CHECK(works[0].response.fast_round == 1);  // rank 1's late answer said ready
    CHECK(job.at(r).Quiet());
  }
  // A controller response received must run where a round puts it.
  REQUIRE(job.at(1).ReceiveResponse(ControllerResponse(1, "loss")).ok());
  CHECK_FALSE(job.at(1).Quiet());
  job.Settle();
  CHECK(job.Drain(1).size() == 1);
  CHECK(job.at(1).Quiet());
  job.at(0).SetStopping();
  CHECK_FALSE(job.at(0).Quiet());
}
