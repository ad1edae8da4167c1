// FastPath as plain data: several ranks' FastPaths exchange round messages in memory under a
// manual clock; the tests check what they decide, in which order and fused how, and the
// deadlines and protocol errors, with no thread, socket or sleep. What cache ids stand for each
// rank's OpCache learns from responses, as its runner would write them.
#include "core/loop/fast_path.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "tests/core/fast_path_job.h"

using namespace kolo;
using namespace kolo::testing;
using namespace std::chrono_literals;

TEST_CASE("A cached allreduce every rank has ready runs on every rank, with its own entry",
          "[core][fastpath]") {
  const int size = GENERATE(1, 2, 3, 4, 9, 12);  // 9 and 12: dissemination
  Job job(size);
  const FastSpec w = Spec("grad/w", 100);
  job.LearnEverywhere(7, w);
  std::vector<TensorEntry*> mine;
  for (int r = 0; r < size; ++r) mine.push_back(job.Submit(r, 7, w));
  job.Settle();
  for (int r = 0; r < size; ++r) {
    std::vector<FastPath::Work> works = job.Drain(r);
    REQUIRE(works.size() == 1);
    CHECK_FALSE(works[0].from_controller);
    CHECK(works[0].response.names == std::vector<std::string>{"grad/w"});
    CHECK(works[0].response.cache_ids == std::vector<uint32_t>{7});
    CHECK(works[0].response.num_elements == std::vector<int64_t>{100});
    CHECK(works[0].response.seq == 0);
    CHECK(works[0].response.fast_round == 1);
    CHECK(works[0].entries == std::vector<TensorEntry*>{mine[r]});
    CHECK(job.at(r).Done());
  }
}

TEST_CASE(
    "Decided tensors run in ascending id order, fused by the controller's rule under the "
    "smallest threshold any rank has",
    "[core][fastpath]") {
  // Rank 1's threshold is 1 KiB: 3 x 400-byte float tensors cut 2 + 1 on every rank.
  Job job(2, 0, {1 << 20, 1024});
  job.LearnEverywhere(4, Spec("c", 100));
  job.LearnEverywhere(2, Spec("b", 100));
  job.LearnEverywhere(1, Spec("a", 100));
  job.LearnEverywhere(9, Spec("d", 10, DataType::kFloat64));  // another dtype: its own batch
  job.LearnEverywhere(12, Spec("e", 10, DataType::kFloat32, ReduceOp::kMax));  // another op
  for (int r = 0; r < 2; ++r) {
    // Submitted in different orders per rank.
    for (uint32_t id :
         r == 0 ? std::vector<uint32_t>{4, 2, 1, 9, 12} : std::vector<uint32_t>{12, 9, 1, 2, 4}) {
      const std::map<uint32_t, FastSpec> specs = {
          {1, Spec("a", 100)},
          {2, Spec("b", 100)},
          {4, Spec("c", 100)},
          {9, Spec("d", 10, DataType::kFloat64)},
          {12, Spec("e", 10, DataType::kFloat32, ReduceOp::kMax)}};
      job.Submit(r, id, specs.at(id));
    }
  }
  job.Settle();
  for (int r = 0; r < 2; ++r) {
    std::vector<FastPath::Work> works = job.Drain(r);
    REQUIRE(works.size() == 4);
    CHECK(works[0].response.names == std::vector<std::string>{"a", "b"});
    CHECK(works[1].response.names == std::vector<std::string>{"c"});
    CHECK(works[2].response.names == std::vector<std::string>{"d"});
    CHECK(works[2].response.dtype == DataType::kFloat64);
    CHECK(works[3].response.names == std::vector<std::string>{"e"});
    CHECK(works[3].response.reduce_op == ReduceOp::kMax);
    // One timeline group per batch, the same on every rank.
    CHECK(works[0].response.fast_group != works[1].response.fast_group);
    CHECK(works[0].response.fast_group == (uint64_t{1} << 52) + (1u << 20));
  }
}

TEST_CASE("A tensor only some ranks have waits, then goes to the controller after the patience",
          "[core][fastpath]") {
  const int size = GENERATE(3, 11);
  Job job(size);
  const FastSpec w = Spec("grad/w", 8);
  job.LearnEverywhere(3, w);
  for (int r = 0; r < size; ++r) {
    if (r != 2) job.Submit(r, 3, w);
  }
  job.Settle();
  CHECK(job.Drain(0).empty());
  CHECK(job.to_controller(0).empty());
  job.clock().Advance(999ms);
  job.Settle();
  CHECK(job.to_controller(0).empty());
  job.clock().Advance(2ms);
  job.Settle();
  // Both waiting ranks send it to the controller, and the round tells rank 2 to do the same.
  CHECK(job.to_controller(0) == std::vector<uint32_t>{3});
  CHECK(job.to_controller(1) == std::vector<uint32_t>{3});
  // Rank 2 now submits it: it is diverted and must go to the controller too.
  TensorEntry late;
  late.meta.name = "grad/w";
  late.meta.shape = {8};
  CHECK_FALSE(job.at(2).Offer(&late, 3, job.clock().Now()));
  // Once the controller's response for that instance went to run, the next takes the fast path
  // again.
  Response ran = ControllerResponse(0, "grad/w");
  ran.cache_ids = {3};
  job.RunEverywhere(ran);
  CHECK(job.at(2).Offer(&late, 3, job.clock().Now()));
}

TEST_CASE("Controller responses run where a round puts them, after those any rank received",
          "[core][fastpath]") {
  Job job(2);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(5, w);
  // Rank 0 has controller response 1 already; rank 1 has not.
  REQUIRE(job.at(0).ReceiveResponse(ControllerResponse(1, "loss")).ok());
  job.Submit(0, 5, w);
  job.Submit(1, 5, w);
  job.Settle();
  std::vector<FastPath::Work> on0 = job.Drain(0);
  REQUIRE(on0.size() == 2);
  CHECK(on0[0].from_controller);
  CHECK(on0[0].response.seq == 1);
  CHECK(on0[1].response.names == std::vector<std::string>{"grad/w"});
  // Rank 1 must run response 1 first and waits for it.
  CHECK(job.Drain(1).empty());
  CHECK(job.at(1).CheckDeadlines(job.clock().Now()).ok());
  job.clock().Advance(30s);
  const Status late = job.at(1).CheckDeadlines(job.clock().Now());
  CHECK(late.code() == StatusCode::kDeadlineExceeded);
  CHECK(late.message() ==
        "waited 30 s (KOLO_TIMEOUT_SECONDS) for controller response 1, which another rank has "
        "received");
  // It arrives: both run, in the same order as on rank 0.
  REQUIRE(job.at(1).ReceiveResponse(ControllerResponse(1, "loss")).ok());
  std::vector<FastPath::Work> on1 = job.Drain(1);
  REQUIRE(on1.size() == 2);
  CHECK(on1[0].from_controller);
  CHECK(on1[1].response.names == std::vector<std::string>{"grad/w"});
  CHECK(job.at(1).CheckDeadlines(job.clock().Now()).ok());
}

TEST_CASE("A controller response out of sequence is a protocol error naming both numbers",
          "[core][fastpath]") {
  Job job(2);
  REQUIRE(job.at(0).ReceiveResponse(ControllerResponse(1, "a")).ok());
  const Status gap = job.at(0).ReceiveResponse(ControllerResponse(3, "c"));
  CHECK(gap.code() == StatusCode::kInternal);
  CHECK(gap.message() == "protocol error: response 3 arrived after 1");
}

TEST_CASE("A round a peer does not answer fails at the deadline naming it; a closed peer at once",
          "[core][fastpath]") {
  Job job(3);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(1, w);
  job.Submit(0, 1, w);
  job.Settle(/*silent=*/{2});
  REQUIRE(job.at(0).waiting());
  CHECK(job.at(0).CheckDeadlines(job.clock().Now()).ok());
  SECTION("silent") {
    job.clock().Advance(29s);
    CHECK(job.at(0).CheckDeadlines(job.clock().Now()).ok());
    job.clock().Advance(1s);
    const Status late = job.at(0).CheckDeadlines(job.clock().Now());
    CHECK(late.code() == StatusCode::kDeadlineExceeded);
    CHECK(late.message() ==
          "fast path: no answer to round 1 from rank(s) 2 within 30 s (KOLO_TIMEOUT_SECONDS)");
  }
  SECTION("closed") {
    job.at(0).PeerClosed(2);
    const Status gone = job.at(0).CheckDeadlines(job.clock().Now());
    CHECK(gone.code() == StatusCode::kUnavailable);
    CHECK(gone.message() == "fast path: rank(s) 2 closed the connection before answering round 1");
  }
}

TEST_CASE(
    "At nine ranks a silent rank stalls the round; its peer names it and the relay it holds up",
    "[core][fastpath]") {
  Job job(9);  // dissemination: rank 3 takes steps 0..3 from ranks 2, 1, 8 and 4
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(1, w);
  job.Submit(0, 1, w);
  job.Settle(/*silent=*/{2});
  REQUIRE(job.at(3).waiting());
  SECTION("silent") {
    job.clock().Advance(30s);
    const Status late = job.at(3).CheckDeadlines(job.clock().Now());
    CHECK(late.code() == StatusCode::kDeadlineExceeded);
    // Rank 4's step needs rank 2's message too, so rank 3 still waits for it.
    CHECK(late.message() ==
          "fast path: no answer to round 1 from rank(s) 2, 4 within 30 s (KOLO_TIMEOUT_SECONDS)");
  }
  SECTION("closed") {
    job.at(3).PeerClosed(2);
    const Status gone = job.at(3).CheckDeadlines(job.clock().Now());
    CHECK(gone.code() == StatusCode::kUnavailable);
    CHECK(gone.message() == "fast path: rank(s) 2 closed the connection before answering round 1");
  }
}

TEST_CASE(
    "Cached broadcasts, allgathers and reducescatters run as decided, each response as the "
    "controller's would be",
    "[core][fastpath]") {
  const int size = GENERATE(2, 3, 9);
  Job job(size);
  const uint32_t bit = kEveryRankCacheIdBit;
  std::vector<int64_t> dims;
  for (int r = 0; r < size; ++r) dims.push_back(r % 2 == 0 ? 2 : 0);  // uneven, some empty
  const FastSpec gather_a = AllgatherSpec("gather/a", 3, dims);
  const FastSpec gather_b = AllgatherSpec("gather/b", 3, dims);
  FastSpec scatter = Spec("scatter", 6 * size);
  scatter.op = OpType::kReducescatter;
  const FastSpec cast = BroadcastSpec("cast", 5, size - 1);
  const FastSpec w = Spec("grad/w", 4);
  job.LearnEverywhere(1, w);
  job.LearnEverywhere(2 | bit, gather_a);
  job.LearnEverywhere(3 | bit, gather_b);
  job.LearnEverywhere(4 | bit, cast);
  job.LearnEverywhere(5 | bit, scatter);
  for (int r = 0; r < size; ++r) {
    job.Submit(r, 5 | bit, scatter);
    job.Submit(r, 4 | bit, cast);
    job.Submit(r, 3 | bit, gather_b);
    job.Submit(r, 2 | bit, gather_a);
    job.Submit(r, 1, w);
  }
  job.Settle();
  for (int r = 0; r < size; ++r) {
    std::vector<FastPath::Work> works = job.Drain(r);
    REQUIRE(works.size() == 4);  // the allreduce; both allgathers fused; the broadcast; the rest
    CHECK(works[0].response.op == OpType::kAllreduce);
    CHECK(works[0].response.names == std::vector<std::string>{"grad/w"});
    const Response& gathers = works[1].response;
    CHECK(gathers.op == OpType::kAllgather);
    CHECK(gathers.names == std::vector<std::string>{"gather/a", "gather/b"});
    std::vector<int64_t> rows = dims;
    rows.insert(rows.end(), dims.begin(), dims.end());
    CHECK(gathers.first_dims == rows);                     // one row of first dimensions per tensor
    CHECK_FALSE(gathers.hierarchy_min_bytes.has_value());  // the configured rule decides
    CHECK(works[2].response.op == OpType::kBroadcast);
    CHECK(works[2].response.root == size - 1);
    CHECK(works[2].response.names == std::vector<std::string>{"cast"});
    CHECK(works[3].response.op == OpType::kReducescatter);
    CHECK(works[3].response.num_elements == std::vector<int64_t>{6 * size});
    CHECK(works[3].response.first_dims.empty());
    for (const FastPath::Work& work : works) {
      CHECK_FALSE(work.from_controller);
      CHECK(std::count(work.entries.begin(), work.entries.end(), nullptr) == 0);
    }
  }
}

TEST_CASE("A decision for an id this rank neither has nor can stand in for is refused",
          "[core][fastpath]") {
  Job job(2);
  const FastSpec w = Spec("grad/w", 4);
  job.Learn(0, 1, w);        // rank 1 never learnt what id 1 stands for,
  CHECK_FALSE(job.Join(1));  // yet it joined: it would have to run it with zeros
  job.Submit(0, 1, w);
  FastPath::Outbox out0;
  REQUIRE(job.at(0).Advance(job.clock().Now(), &out0).ok());
  REQUIRE(out0.round);
  REQUIRE(job.at(1).ReceiveRound(0, *out0.round, job.clock().Now()).ok());
  FastPath::Outbox out1;
  const Status refused = job.at(1).Advance(job.clock().Now(), &out1);
  CHECK(refused.code() == StatusCode::kInternal);
  CHECK(refused.message() ==
        "fast path: round 1 decided on cache id 1, which this rank neither reported ready nor "
        "can stand in for");
}

TEST_CASE("With KOLO_AUTOTUNE rank 0's rounds carry the tuner's threshold and the others no limit",
          "[core][fast_path]") {
  Autotuner::Config tuning;
  tuning.threshold_bytes = 4 << 20;
  Autotuner tuner(tuning);
  // The hierarchical rule: rank 0 sends the tuner's while it tunes it, else its configured one
  // (KOLO_HIERARCHICAL=auto); the others send flat, "no limit".
  const bool tuned = GENERATE(false, true);
  if (tuned) tuner.TuneHierarchy(32 << 10);
  std::deque<Options> options(2);
  std::deque<OpCache> caches;
  std::vector<std::unique_ptr<FastPath>> ranks;
  for (int r = 0; r < 2; ++r) {
    options[r].rank = r;
    options[r].size = 2;
    options[r].fusion_threshold_bytes = 1 << 20;  // what the tuner replaces
    options[r].autotune = true;
    options[r].timeout_seconds = 30.0;
    caches.emplace_back(2, /*fast_path=*/true);
    ranks.push_back(
        std::make_unique<FastPath>(options[r], &caches[r], nullptr, r == 0 ? &tuner : nullptr));
  }
  ManualClock clock;
  const FastSpec spec = Spec("w", 4);
  TensorEntry entries[2];
  for (int r = 0; r < 2; ++r) {
    entries[r].meta.name = spec.name;
    entries[r].meta.op = OpType::kAllreduce;
    entries[r].meta.dtype = spec.dtype;
    entries[r].meta.shape = {spec.num_elements};
    Teach(caches[r], 1, spec);
    REQUIRE(ranks[r]->Offer(&entries[r], 1, clock.Now()));
  }
  FastPath::Outbox out[2];
  for (int r = 0; r < 2; ++r) {
    REQUIRE(ranks[r]->Advance(clock.Now(), &out[r]).ok());
    REQUIRE(out[r].round.has_value());
  }
  CHECK(out[0].round->fusion_threshold == static_cast<uint64_t>(tuner.fusion_threshold_bytes()));
  CHECK(out[1].round->fusion_threshold == UINT64_MAX);
  const uint64_t rule = tuned ? 32 << 10 : kHierarchicalAutoMinBytes;
  CHECK(out[0].round->hierarchy_min_bytes == rule);
  CHECK(out[1].round->hierarchy_min_bytes == kHierarchyFlat);
  // Each rank takes the smallest, and the response it runs carries it to the executor.
  REQUIRE(ranks[0]->ReceiveRound(1, *out[1].round, clock.Now()).ok());
  REQUIRE(ranks[1]->ReceiveRound(0, *out[0].round, clock.Now()).ok());
  for (int r = 0; r < 2; ++r) {
    FastPath::Outbox again;
    REQUIRE(ranks[r]->Advance(clock.Now(), &again).ok());
    FastPath::Work work;
    REQUIRE(ranks[r]->NextWork(clock.Now(), &work));
    CHECK(work.response.names == std::vector<std::string>{"w"});
    CHECK(work.response.hierarchy_min_bytes == std::optional<uint64_t>(rule));
  }
}

TEST_CASE(
    "Without KOLO_AUTOTUNE the rounds carry the ranks' KOLO_HIERARCHICAL rule to the responses",
    "[core][fast_path]") {
  const Hierarchical mode = GENERATE(Hierarchical::kAuto, Hierarchical::kOn, Hierarchical::kOff);
  Job job(3, 1 << 20, {}, mode);
  const FastSpec w = Spec("grad/w", 100);
  job.LearnEverywhere(7, w);
  for (int r = 0; r < 3; ++r) job.Submit(r, 7, w);
  job.Settle();
  for (int r = 0; r < 3; ++r) {
    std::vector<FastPath::Work> works = job.Drain(r);
    REQUIRE(works.size() == 1);
    CHECK(works[0].response.hierarchy_min_bytes == ConfiguredHierarchyMinBytes(mode));
  }
}

// A cached allreduce of process set `set` (its id carries kEveryRankCacheIdBit, as the
// controller gives every set op's).
