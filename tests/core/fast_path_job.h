// The fast path's test job (tests/core/fast_path*_test.cc): several ranks' FastPaths, each
// with its OpCache, exchanging round messages in memory under a manual clock, and the specs and
// responses the tests teach them. No thread, socket or sleep; one test thread.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/hierarchy_rule.h"
#include "core/loop/fast_path.h"

namespace kolo::testing {

inline FastSpec Spec(const std::string& name, int64_t elements, DataType dtype = DataType::kFloat32,
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
inline FastSpec BroadcastSpec(const std::string& name, int64_t elements, int root) {
  FastSpec s = Spec(name, elements);
  s.op = OpType::kBroadcast;
  s.root = root;
  return s;
}

// A cached allgather of rows of `row` floats, `first_dims` rows on each rank.
inline FastSpec AllgatherSpec(const std::string& name, int64_t row,
                              std::vector<int64_t> first_dims) {
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
inline void Teach(OpCache& cache, uint32_t id, const FastSpec& spec) {
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
inline void TeachForeign(OpCache& cache, uint32_t id, const FastSpec& spec) {
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
  // `eager_bytes`: each rank's KOLO_EAGER_BYTES (empty: 0 everywhere).
  explicit Job(int size, int64_t threshold = 1 << 20, std::vector<int64_t> thresholds = {},
               Hierarchical hierarchical = Hierarchical::kAuto,
               std::vector<int64_t> eager_bytes = {}) {
    for (int r = 0; r < size; ++r) {
      Options& options = options_.emplace_back();  // the defaults: a patience of 1 s
      options.rank = r;
      options.size = size;
      options.hierarchical = hierarchical;
      options.fusion_threshold_bytes = thresholds.empty() ? threshold : thresholds[r];
      options.timeout_seconds = 30.0;
      options.eager_bytes = eager_bytes.empty() ? 0 : static_cast<int>(eager_bytes[r]);
      REQUIRE(FastPath::DivertAfterSeconds(options) == 1.0);
      caches_.push_back(std::make_unique<OpCache>(size, /*fast_path=*/true));
      ranks_.push_back(std::make_unique<FastPath>(options, caches_.back().get(), nullptr));
      to_controller_.emplace_back();
    }
  }

  FastPath& at(int r) { return *ranks_[r]; }
  // Gives rank `r` a fresh fast path (before it was used) that stages with `stager`.
  void StageWith(int r, RoundStager stager) {
    ranks_[r] = std::make_unique<FastPath>(options_[r], caches_[r].get(), nullptr, nullptr, false,
                                           std::move(stager));
  }
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

inline Response ControllerResponse(uint64_t seq, const std::string& name) {
  Response r;
  r.seq = seq;
  r.names = {name};
  r.num_elements = {4};
  return r;
}

}  // namespace kolo::testing
