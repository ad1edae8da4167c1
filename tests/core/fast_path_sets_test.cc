// FastPath with process sets, as plain data (tests/core/fast_path_job.h): a set's cached ops
// run among its members in one order everywhere, the others learn the set's ids, and a removed
// set's ids stand for nothing.
#include <catch2/catch.hpp>
#include <vector>

#include "core/loop/fast_path.h"
#include "tests/core/fast_path_job.h"

using namespace kolo;
using namespace kolo::testing;
using namespace std::chrono_literals;

FastSpec SetSpec(const std::string& name, int64_t elements, int set) {
  FastSpec s = Spec(name, elements);
  s.process_set = set;
  return s;
}

TEST_CASE("A set's cached op runs once its members have it; the others run nothing of it",
          "[core][fastpath][process_sets]") {
  const int size = GENERATE(3, 11);  // 11: dissemination, the others' reports relayed
  Job job(size);
  const int last = size - 1;
  const uint32_t id = 5 | kEveryRankCacheIdBit;
  const FastSpec x = SetSpec("x [process set 1]", 16, 1);
  job.LearnInSet(id, x, {0, last});
  // Rank 1 has no op of its own, yet a member's round needs its answer at once.
  CHECK_FALSE(job.at(1).Quiet());
  TensorEntry* e0 = job.Submit(0, id, x);
  job.Settle();
  CHECK(job.Drain(0).empty());  // the last rank has not submitted yet
  TensorEntry* e_last = job.Submit(last, id, x);
  job.Settle();
  for (int r = 0; r < size; ++r) {
    std::vector<FastPath::Work> works = job.Drain(r);
    if (r != 0 && r != last) {
      CHECK(works.empty());
      continue;
    }
    REQUIRE(works.size() == 1);
    CHECK_FALSE(works[0].from_controller);
    CHECK(works[0].response.process_set == 1);
    CHECK(works[0].response.names == std::vector<std::string>{x.name});
    CHECK(works[0].entries == std::vector<TensorEntry*>{r == 0 ? e0 : e_last});
    CHECK(job.to_controller(r).empty());
  }
}

TEST_CASE(
    "Ops of overlapping sets run in one order everywhere, by set and then id, never fused "
    "across sets",
    "[core][fastpath][process_sets]") {
  // Sets 1 = {0, 1} and 2 = {1, 2}; rank 1 is in both. Every op is small and fusible with the
  // others but for its set.
  Job job(3);
  const FastSpec g = Spec("g", 4);  // the job's set
  const FastSpec a = SetSpec("a [process set 1]", 4, 1);
  const FastSpec a2 = SetSpec("a2 [process set 1]", 4, 1);
  const FastSpec b = SetSpec("b [process set 2]", 4, 2);
  const uint32_t id_a = 7 | kEveryRankCacheIdBit, id_a2 = 9 | kEveryRankCacheIdBit;
  // Between set 1's two ids: ascending order alone would cut a | b | a2 on rank 1 and a + a2
  // on rank 0, two different transfers.
  const uint32_t id_b = 8 | kEveryRankCacheIdBit;
  job.LearnEverywhere(11, g);
  job.LearnInSet(id_a, a, {0, 1});
  job.LearnInSet(id_a2, a2, {0, 1});
  job.LearnInSet(id_b, b, {1, 2});
  for (int r = 0; r < 3; ++r) {
    if (r != 2) job.Submit(r, id_a2, a2);
    if (r != 0) job.Submit(r, id_b, b);
    if (r != 2) job.Submit(r, id_a, a);
    job.Submit(r, 11, g);
  }
  job.Settle();
  auto cut = [](const std::vector<FastPath::Work>& works) {
    std::vector<std::vector<std::string>> names;
    for (const FastPath::Work& w : works) names.push_back(w.response.names);
    return names;
  };
  using Cut = std::vector<std::vector<std::string>>;
  CHECK(cut(job.Drain(0)) == Cut{{"g"}, {a.name, a2.name}});
  CHECK(cut(job.Drain(1)) == Cut{{"g"}, {a.name, a2.name}, {b.name}});
  CHECK(cut(job.Drain(2)) == Cut{{"g"}, {b.name}});
}

TEST_CASE(
    "A rank that learns a set's id after the members reported it starts the round that runs it",
    "[core][fastpath][process_sets]") {
  Job job(3);
  const uint32_t id = 4 | kEveryRankCacheIdBit;
  const FastSpec x = SetSpec("x [process set 1]", 4, 1);
  job.Learn(0, id, x);
  job.Learn(1, id, x);
  job.Submit(0, id, x);
  job.Submit(1, id, x);
  job.Settle();
  CHECK(job.Drain(0).empty());  // rank 2 did not report it: it did not know it yet
  job.LearnForeign(2, id, x);
  job.Settle();
  CHECK(job.Drain(0).size() == 1);
  CHECK(job.Drain(1).size() == 1);
  CHECK(job.Drain(2).empty());
}

TEST_CASE("While a member's join of a set is in flight the set's ops go to the controller",
          "[core][fastpath][process_sets]") {
  Job job(3);
  const uint32_t id = 6 | kEveryRankCacheIdBit;
  const FastSpec x = SetSpec("x [process set 1]", 4, 1);
  job.LearnInSet(id, x, {0, 1});
  CHECK_FALSE(job.Join(1, 1));
  CHECK_FALSE(job.Offers(1, id, x));  // the joined rank's own op of the set, too
  job.Settle();
  CHECK_FALSE(job.Offers(0, id, x));  // diverted on rank 0 by rank 1's round
  // The instance ran at the controller; the join is still in flight: the next goes there too.
  Response instance = ControllerResponse(0, x.name);
  instance.process_set = 1;
  instance.cache_ids = {id};
  job.RunEverywhere(instance);
  job.Settle();
  CHECK_FALSE(job.Offers(0, id, x));
  // The join is over: once the last instance ran, the set's op takes the fast path again.
  Response joined = ControllerResponse(0, "join [process set 1]");
  joined.op = OpType::kJoin;
  joined.process_set = 1;
  job.RunEverywhere(joined);
  job.RunEverywhere(instance);
  job.Settle();
  job.Submit(0, id, x);
  job.Submit(1, id, x);
  job.Settle();
  CHECK(job.Drain(0).size() == 1);
}

TEST_CASE("A removed set's ids stand for nothing, on its members and elsewhere",
          "[core][fastpath][process_sets]") {
  Job job(2);
  const uint32_t id = 8 | kEveryRankCacheIdBit;
  const FastSpec x = SetSpec("x [process set 3]", 4, 3);
  job.LearnInSet(id, x, {0});
  CHECK_FALSE(job.at(1).Quiet());
  job.Settle();
  // The removal's response goes to run, and each rank's runner applies it to the cache.
  Response removed = ControllerResponse(0, "kolo.remove_process_set");
  removed.op = OpType::kRemoveProcessSet;
  removed.root = 3;
  job.RunEverywhere(removed);
  job.cache(0).ForgetSet(3);
  job.cache(1).ForgetSet(3);
  CHECK_FALSE(job.Offers(0, id, x));
  job.Settle();
  CHECK(job.Drain(1).empty());
  CHECK(job.at(1).Quiet());  // nothing of another set is left to answer for
}

TEST_CASE("A set's removal waits until the rank's cached ops of the set went to the controller",
          "[core][fastpath][process_sets]") {
  Job job(3);
  const uint32_t id = 9 | kEveryRankCacheIdBit;
  const FastSpec x = SetSpec("x [process set 2]", 4, 2);
  job.LearnInSet(id, x, {0, 1});
  TensorEntry other_set;
  other_set.meta.op = OpType::kRemoveProcessSet;
  other_set.meta.root = 5;
  CHECK_FALSE(job.at(0).Offer(&other_set, 0, job.clock().Now()));  // nothing of set 5 waits
  job.Submit(0, id, x);
  job.Settle();  // rank 1 never submits x: its round does not run it
  TensorEntry removal;
  removal.meta.op = OpType::kRemoveProcessSet;
  removal.meta.root = 2;
  REQUIRE(job.at(0).Offer(&removal, 0, job.clock().Now()));
  CHECK(job.at(0).TakeReleased() == nullptr);
  job.Settle();
  // x went to the controller first, announced as diverted so that rank 1's copy follows it;
  // then the removal may go.
  CHECK(job.to_controller(0) == std::vector<uint32_t>{id});
  CHECK_FALSE(job.Offers(1, id, x));
  CHECK(job.at(0).TakeReleased() == &removal);
  CHECK(job.at(0).TakeReleased() == nullptr);
}

TEST_CASE("Another set's name stands for its latest id only; id 0 forgets it",
          "[core][fastpath][process_sets]") {
  Job job(3);
  const uint32_t old_id = 4 | kEveryRankCacheIdBit, new_id = 6 | kEveryRankCacheIdBit;
  const FastSpec x = SetSpec("x [process set 1]", 4, 1);
  job.LearnInSet(old_id, x, {0, 1});
  job.LearnForeign(2, new_id, x);  // the members' tensor changed: a fresh id
  // The members still holding the old id (as if their cached copies had not caught up) find
  // rank 2 no longer reporting it: it does not run.
  job.Submit(0, old_id, x);
  job.Submit(1, old_id, x);
  job.Settle();
  CHECK(job.Drain(0).empty());
  job.LearnForeign(2, 0, x);  // the name lost its id
  job.Settle();
  CHECK(job.Drain(2).empty());
  CHECK(job.at(2).Quiet());  // nothing of another set is left to answer for
}
