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

#include "core/hierarchy_rule.h"

using namespace kolo;
using namespace std::chrono_literals;

namespace {

FastSpec Spec(const std::string& name, int64_t elements, DataType dtype = DataType::kFloat32,
              ReduceOp op = ReduceOp::kSum) {
  FastSpec s;
  s.name = name;
  s.num_elements = elements;
  s.dtype = dtype;
  s.reduce_op = op;
  s.fusion_bytes = elements * static_cast<int64_t>(DataTypeSize(dtype));
  return s;
}

// A cached broadcast from `root`.
FastSpec BroadcastSpec(const std::string& name, int64_t elements, int root) {
  FastSpec s = Spec(name, elements);
  s.op = OpType::kBroadcast;
  s.root = root;
  return s;
}

// A cached allgather of rows of `row` floats, `first_dims` rows on each rank.
FastSpec AllgatherSpec(const std::string& name, int64_t row, std::vector<int64_t> first_dims) {
  FastSpec s = Spec(name, first_dims.at(0) * row);
  s.op = OpType::kAllgather;
  int64_t rows = 0;
  for (int64_t dim : first_dims) rows += dim;
  s.fusion_bytes = rows * row * 4;
  s.first_dims = std::move(first_dims);
  return s;
}

// What `cache` learns from the controller's response that assigned `id` to `spec` (one tensor),
// run with this rank's tensor of it, as the runner writes it (OpCache::Remember).
void Teach(OpCache& cache, uint32_t id, const FastSpec& spec) {
  Response r;
  r.signature() = spec.signature();
  r.names = {spec.name};
  r.cache_ids = {id};
  r.num_elements = {spec.num_elements};
  r.first_dims = spec.first_dims;
  r.splits = spec.splits;
  TensorEntry entry;
  entry.meta.signature() = spec.signature();
  entry.meta.name = spec.name;
  entry.meta.shape = {spec.num_elements};
  if (spec.op == OpType::kAllgather && !spec.first_dims.empty() && spec.first_dims[0] > 0) {
    entry.meta.shape = {spec.first_dims[0], spec.num_elements / spec.first_dims[0]};
  }
  cache.Remember(r, {&entry});
  REQUIRE(cache.Own(id) != nullptr);
  CHECK(cache.Own(id)->fusion_bytes == spec.fusion_bytes);
}

// What `cache` learns from a response of `spec`'s set, which this rank is not in, assigning
// `id` (0: the name lost its id).
void TeachForeign(OpCache& cache, uint32_t id, const FastSpec& spec) {
  Response r;
  r.signature() = spec.signature();
  r.names = {spec.name};
  r.cache_ids = {id};
  cache.RememberForeign(r);
}

// N ranks' fast paths, each with its OpCache, their entries and a manual clock; round messages
// travel at once.
class Job {
 public:
  explicit Job(int size, int64_t threshold = 1 << 20, std::vector<int64_t> thresholds = {},
               Hierarchical hierarchical = Hierarchical::kAuto) {
    for (int r = 0; r < size; ++r) {
      Options& options = options_.emplace_back();  // the defaults: a patience of 1 s
      options.rank = r;
      options.size = size;
      options.hierarchical = hierarchical;
      options.fusion_threshold_bytes = thresholds.empty() ? threshold : thresholds[r];
      options.timeout_seconds = 30.0;
      REQUIRE(FastPath::DivertAfterSeconds(options) == 1.0);
      caches_.push_back(std::make_unique<OpCache>(size, /*fast_path=*/true));
      ranks_.push_back(std::make_unique<FastPath>(options, caches_.back().get(), nullptr));
      to_controller_.emplace_back();
    }
  }

  FastPath& at(int r) { return *ranks_[r]; }
  ManualClock& clock() { return clock_; }
  const std::vector<uint32_t>& to_controller(int r) const { return to_controller_[r]; }

  OpCache& cache(int r) { return *caches_[r]; }

  // Rank `r` learns `id` for `spec`, as from the controller's response that assigned it.
  void Learn(int r, uint32_t id, const FastSpec& spec) { Teach(cache(r), id, spec); }
  void LearnEverywhere(uint32_t id, const FastSpec& spec) {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) Learn(r, id, spec);
  }
  // Rank `r`, not in `spec`'s set, learns `id` for it (0: the name lost its id).
  void LearnForeign(int r, uint32_t id, const FastSpec& spec) { TeachForeign(cache(r), id, spec); }

  // `spec`'s set has the ranks `members`: they learn `id` for it, the others as another set's.
  void LearnInSet(uint32_t id, const FastSpec& spec, const std::vector<int>& members) {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      if (std::find(members.begin(), members.end(), r) != members.end()) {
        Learn(r, id, spec);
      } else {
        LearnForeign(r, id, spec);
      }
    }
  }

  // Rank `rank` submits a join of `set` (0: the job); true if the fast path holds it back.
  bool Join(int rank, int set = 0) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta.name = "join";
    entry->meta.op = OpType::kJoin;
    entry->meta.process_set = set;
    TensorEntry* raw = entry.get();
    entries_.push_back(std::move(entry));
    return at(rank).Offer(raw, 0, clock_.Now());
  }

  // The controller's next response, `response`, reaches every rank, and a round places it: each
  // rank hands it out to run (nothing else is decided meanwhile).
  void RunEverywhere(Response response) {
    response.seq = ++controller_seq_;
    for (auto& fast : ranks_) REQUIRE(fast->ReceiveResponse(response).ok());
    Settle();
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      const std::vector<FastPath::Work> works = Drain(r);
      REQUIRE(works.size() == 1);
      REQUIRE(works[0].from_controller);
    }
  }

  // A cached allreduce of `spec` on `rank`, offered to its fast path.
  TensorEntry* Submit(int rank, uint32_t id, const FastSpec& spec) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta.signature() = spec.signature();
    entry->meta.name = spec.name;
    entry->meta.shape = {spec.num_elements};
    TensorEntry* raw = entry.get();
    entries_.push_back(std::move(entry));
    REQUIRE(at(rank).Offer(raw, id, clock_.Now()));
    return raw;
  }

  // Whether rank `rank`'s fast path takes a cached op of `spec` (entries it refuses go to the
  // controller; the test keeps them all the same).
  bool Offers(int rank, uint32_t id, const FastSpec& spec) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta.name = spec.name;
    entry->meta.op = spec.op;
    entry->meta.shape = {spec.num_elements};
    TensorEntry* raw = entry.get();
    entries_.push_back(std::move(entry));
    return at(rank).Offer(raw, id, clock_.Now());
  }

  // Advances every rank and delivers every round message, until nothing moves. Ranks in
  // `silent` neither advance nor receive.
  void Settle(const std::vector<int>& silent = {}) {
    auto is_silent = [&](int r) {
      return std::find(silent.begin(), silent.end(), r) != silent.end();
    };
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        if (is_silent(r)) continue;
        FastPath::Outbox out;
        REQUIRE(at(r).Advance(clock_.Now(), &out).ok());
        to_controller_[r].insert(to_controller_[r].end(), out.to_controller.begin(),
                                 out.to_controller.end());
        for (const RoundSend& send : out.sends) {
          moved = true;
          for (int p = 0; p < static_cast<int>(ranks_.size()); ++p) {
            if (p == r || is_silent(p) || (send.to >= 0 && send.to != p)) continue;
            REQUIRE(at(p).ReceiveRound(r, send.message, clock_.Now()).ok());
          }
        }
        if (out.progress) moved = true;
      }
    }
  }

  // Everything rank `r` may run now, in order.
  std::vector<FastPath::Work> Drain(int r) {
    std::vector<FastPath::Work> works;
    FastPath::Work w;
    while (at(r).NextWork(clock_.Now(), &w)) works.push_back(w);
    return works;
  }

 private:
  ManualClock clock_;
  std::deque<Options> options_;  // each rank's; a deque keeps them in place as it grows
  std::vector<std::unique_ptr<OpCache>> caches_;
  std::vector<std::unique_ptr<FastPath>> ranks_;
  uint64_t controller_seq_ = 0;
  std::vector<std::unique_ptr<TensorEntry>> entries_;
  std::vector<std::vector<uint32_t>> to_controller_;
};

Response ControllerResponse(uint64_t seq, const std::string& name) {
  Response r;
  r.seq = seq;
  r.names = {name};
  r.num_elements = {4};
  return r;
}

}  // namespace

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
