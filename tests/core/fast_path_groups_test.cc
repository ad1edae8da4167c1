// Grouped ops and barriers in FastPath as plain data (tests/core/fast_path_job.h): a cached
// group waits until every rank has all of it and is cut into exactly the responses the
// controller's planner (controller/fusion_planner.h) makes of it; a group with a member that
// changed on one rank goes to the controller whole, on every rank; a barrier runs first in its
// round, and waits on the rounds only with nothing of its rank's before it.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "controller/fusion_planner.h"
#include "tests/core/fast_path_job.h"

using namespace kolo;
using namespace kolo::testing;
using namespace std::chrono_literals;

namespace {

constexpr uint32_t kBit = kEveryRankCacheIdBit;

// A group's members as their ranks submit them, and the ids the controller gave them.
struct Group {
  std::string key;
  std::vector<TensorMeta> metas;
  std::vector<uint32_t> ids;
};

// The group "g/a,g/b,g/c,g/d" of allreduces: float32, float64, float32, float32 (4 KiB, 800 B,
// 4 KiB, 4 KiB), with ids that are not in the members' order.
Group MixedGroup() {
  Group g;
  g.key = "g/a,g/b,g/c,g/d";
  const std::vector<std::pair<std::string, DataType>> members = {{"g/a", DataType::kFloat32},
                                                                 {"g/b", DataType::kFloat64},
                                                                 {"g/c", DataType::kFloat32},
                                                                 {"g/d", DataType::kFloat32}};
  for (const auto& [name, dtype] : members) {
    TensorMeta meta;
    meta.name = name;
    meta.dtype = dtype;
    meta.shape = {dtype == DataType::kFloat64 ? 100 : 1024};
    meta.group = g.key;
    meta.group_size = 4;
    g.metas.push_back(meta);
  }
  g.ids = {9 | kBit, 4 | kBit, 7 | kBit, 5 | kBit};
  return g;
}

// What every rank's cache learns from the controller's responses for `g` (one per dtype, as
// the planner cut them), run with each rank's own entries.
void TeachGroup(Job& job, int size, const Group& g) {
  std::vector<controller::ReadyTensor> ready;
  for (size_t i = 0; i < g.metas.size(); ++i) {
    controller::ReadyTensor t;
    t.meta = g.metas[i];
    t.cache_id = g.ids[i];
    ready.push_back(t);
  }
  uint64_t seq = 1;
  for (const Response& response : controller::PlanResponses(ready, 1024, &seq)) {
    std::vector<TensorEntry> entries(response.names.size());
    std::vector<TensorEntry*> pointers;
    for (size_t i = 0; i < response.names.size(); ++i) {
      for (const TensorMeta& meta : g.metas) {
        if (meta.name == response.names[i]) entries[i].meta = meta;
      }
      pointers.push_back(&entries[i]);
    }
    for (int r = 0; r < size; ++r) job.cache(r).Remember(response, pointers);
  }
}

// Rank `rank` offers the group, each member with `ids[i]` (0: sent in full).
bool OfferGroup(Job& job, int rank, const Group& g, const std::vector<uint32_t>& ids,
                std::vector<std::unique_ptr<TensorEntry>>* keep) {
  std::vector<TensorEntry*> entries;
  for (const TensorMeta& meta : g.metas) {
    keep->push_back(std::make_unique<TensorEntry>());
    keep->back()->meta = meta;
    entries.push_back(keep->back().get());
  }
  return job.at(rank).OfferGroup(entries, ids, job.clock().Now());
}

}  // namespace

TEST_CASE(
    "A cached group runs once every rank has all of it, cut as the controller's planner cuts "
    "it",
    "[core][fastpath][group]") {
  const int size = GENERATE(2, 3, 9);  // 9: dissemination
  Job job(size, 1024);                 // a threshold below a member: the group ignores it
  const Group g = MixedGroup();
  TeachGroup(job, size, g);
  const FastSpec lone = Spec("lone", 10);  // an ungrouped allreduce in the same round
  job.LearnEverywhere(6, lone);
  std::vector<std::unique_ptr<TensorEntry>> keep;
  for (int r = 0; r < size; ++r) {
    job.Submit(r, 6, lone);
    if (r != size - 1) REQUIRE(OfferGroup(job, r, g, g.ids, &keep));
  }
  job.Settle();
  // The last rank has not submitted the group: only the lone allreduce runs.
  for (int r = 0; r < size; ++r) {
    const std::vector<FastPath::Work> works = job.Drain(r);
    REQUIRE(works.size() == 1);
    CHECK(works[0].response.names == std::vector<std::string>{"lone"});
  }
  REQUIRE(OfferGroup(job, size - 1, g, g.ids, &keep));
  job.Settle();
  // What the controller makes of the group: one response per dtype, in the order the dtypes
  // first appear among the members, members in their order, whatever the threshold.
  std::vector<controller::ReadyTensor> ready;
  for (size_t i = 0; i < g.metas.size(); ++i) {
    ready.push_back({g.metas[i], "", g.ids[i], StatusCode::kMismatch, {}, {}});
  }
  uint64_t seq = 1;
  const std::vector<Response> planned = controller::PlanResponses(ready, 1024, &seq);
  REQUIRE(planned.size() == 2);
  for (int r = 0; r < size; ++r) {
    INFO("rank " << r);
    const std::vector<FastPath::Work> works = job.Drain(r);
    REQUIRE(works.size() == planned.size());
    for (size_t i = 0; i < planned.size(); ++i) {
      CHECK(works[i].response.names == planned[i].names);
      CHECK(works[i].response.cache_ids == planned[i].cache_ids);
      CHECK(works[i].response.num_elements == planned[i].num_elements);
      CHECK(works[i].response.dtype == planned[i].dtype);
      CHECK(works[i].entries.size() == planned[i].names.size());
      for (size_t j = 0; j < works[i].entries.size(); ++j) {
        REQUIRE(works[i].entries[j] != nullptr);
        CHECK(works[i].entries[j]->meta.name == planned[i].names[j]);
      }
    }
    CHECK(job.at(r).Done());
  }
}

TEST_CASE(
    "A group with a member changed on one rank goes to the controller whole, on every rank, in "
    "its order",
    "[core][fastpath][group]") {
  const int size = 3;
  Job job(size);
  const Group g = MixedGroup();
  TeachGroup(job, size, g);
  std::vector<std::unique_ptr<TensorEntry>> keep;
  for (int r = 0; r < 2; ++r) REQUIRE(OfferGroup(job, r, g, g.ids, &keep));
  // Rank 2's g/c has a new shape: its request goes in full, and so does the whole group.
  std::vector<uint32_t> changed = g.ids;
  changed[2] = 0;
  CHECK_FALSE(OfferGroup(job, 2, g, changed, &keep));
  job.Settle();
  // The others' copies go to the controller at once (no patience), all four, in the group's
  // order, so that the controller plans them as one group.
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(job.to_controller(r) == g.ids);
    CHECK(job.Drain(r).empty());
  }
  // A group of which one member is diverted does not wait either.
  CHECK_FALSE(OfferGroup(job, 0, g, g.ids, &keep));
}

TEST_CASE("A group one rank never completes goes to the controller whole after the patience",
          "[core][fastpath][group]") {
  Job job(2);
  const Group g = MixedGroup();
  TeachGroup(job, 2, g);
  std::vector<std::unique_ptr<TensorEntry>> keep;
  REQUIRE(OfferGroup(job, 0, g, g.ids, &keep));
  job.Settle();
  job.clock().Advance(1001ms);
  job.Settle();
  CHECK(job.to_controller(0) == g.ids);  // in the group's order, together
}

TEST_CASE(
    "A cached barrier runs first in its round, alone; with an op of its rank's before it, it "
    "goes to the controller and takes the others' along",
    "[core][fastpath][barrier]") {
  Job job(2);
  FastSpec barrier = Spec("kolo.barrier", 0);
  barrier.op = OpType::kBarrier;
  barrier.dtype = DataType::kUInt8;
  const FastSpec w = Spec("w", 10);
  job.LearnEverywhere(3 | kBit, barrier);
  job.LearnEverywhere(1, w);
  REQUIRE(job.cache(0).Own(3 | kBit) != nullptr);  // a barrier's id takes the rounds
  SECTION("nothing before it") {
    for (int r = 0; r < 2; ++r) {
      job.Submit(r, 3 | kBit, barrier);
      job.Submit(r, 1, w);  // submitted after it: decided in the same round, runs after it
    }
    job.Settle();
    for (int r = 0; r < 2; ++r) {
      const std::vector<FastPath::Work> works = job.Drain(r);
      REQUIRE(works.size() == 2);
      CHECK(works[0].response.op == OpType::kBarrier);
      CHECK(works[0].response.names == std::vector<std::string>{"kolo.barrier"});
      CHECK(works[1].response.names == std::vector<std::string>{"w"});
    }
  }
  SECTION("an op of rank 1's before it") {
    job.Submit(0, 3 | kBit, barrier);
    TensorEntry entry;
    entry.meta.name = "kolo.barrier";
    entry.meta.op = OpType::kBarrier;
    CHECK_FALSE(job.at(1).Offer(&entry, 3 | kBit, job.clock().Now(), /*behind_others=*/true));
    job.Settle();
    // Rank 0's barrier follows it to the controller at once.
    CHECK(job.to_controller(0) == std::vector<uint32_t>{3 | kBit});
    CHECK(job.Drain(0).empty());
  }
}

TEST_CASE(
    "While a rank's join is in flight the job's groups go to the controller at once, where its "
    "zeros stand in",
    "[core][fastpath][group][join]") {
  Job job(2);
  const Group g = MixedGroup();
  TeachGroup(job, 2, g);
  std::vector<std::unique_ptr<TensorEntry>> keep;
  CHECK_FALSE(job.Join(1));  // nothing of rank 1's waits: its join goes to the controller
  REQUIRE(OfferGroup(job, 0, g, g.ids, &keep));
  job.Settle();
  // Rank 1 diverted the group's ids: rank 0's copies leave without waiting the patience.
  CHECK(job.to_controller(0) == g.ids);
  CHECK(job.Drain(0).empty());
}
