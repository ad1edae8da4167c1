// The fast path's eager inputs (docs/FAST-PATH.md, "Eager") as plain data: which inputs a round
// message carries (KOLO_EAGER_BYTES), and which decided work may run from them: every rank's
// input of every op in the batch, in rank order, the same on every rank; else none.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "core/loop/fast_path.h"
#include "tests/core/fast_path_job.h"

using namespace kolo;
using namespace kolo::testing;

namespace {

// Rank r's input of `spec` (float32): every element r + 1 + id.
struct Inputs {
  std::vector<std::vector<float>> by_rank;

  void Give(int size, TensorEntry* entry, int r, uint32_t id, const FastSpec& spec) {
    by_rank.resize(static_cast<size_t>(size) * 64);
    std::vector<float>& data = by_rank[static_cast<size_t>(r) * 64 + id];
    data.assign(static_cast<size_t>(spec.num_elements), static_cast<float>(r + 1 + id));
    entry->input = TensorView{data.data(), DataType::kFloat32, {spec.num_elements}, Device::Cpu()};
    entry->output = entry->input;
  }
};

// Rank 0 advances alone and its round message reaches every peer its sends name; returns it.
RoundMessage AdvanceFirst(Job& job, int size) {
  FastPath::Outbox out;
  REQUIRE(job.at(0).Advance(job.clock().Now(), &out).ok());
  REQUIRE(out.round.has_value());
  for (const RoundSend& send : out.sends) {
    for (int p = 1; p < size; ++p) {
      if (send.to < 0 || send.to == p) {
        REQUIRE(job.at(p).ReceiveRound(0, send.message, job.clock().Now()).ok());
      }
    }
  }
  return *out.round;
}

// Rank r's next work; its eager inputs' first element of each (tensor, rank), checked while
// they are valid (until the next NextWork).
struct Taken {
  bool any = false;
  std::vector<std::string> names;
  std::vector<float> firsts;
};
Taken Next(Job& job, int r) {
  Taken taken;
  FastPath::Work work;
  if (!job.at(r).NextWork(job.clock().Now(), &work)) return taken;
  taken.any = true;
  taken.names = work.response.names;
  for (const void* p : work.response.eager_inputs) {
    float first = 0;
    std::memcpy(&first, p, sizeof(first));
    taken.firsts.push_back(first);
  }
  return taken;
}

}  // namespace

TEST_CASE(
    "Every rank's input rides in its round message and the work runs from them in rank "
    "order",
    "[core][fastpath][eager]") {
  const int size = GENERATE(2, 3, 4);
  Job job(size, 1 << 20, {}, Hierarchical::kAuto, std::vector<int64_t>(size, 4096));
  const FastSpec a = Spec("a", 4);
  const FastSpec b = Spec("b", 3);
  job.LearnEverywhere(1, a);
  job.LearnEverywhere(2, b);
  Inputs inputs;
  for (int r = 0; r < size; ++r) {
    inputs.Give(size, job.Submit(r, 1, a), r, 1, a);
    inputs.Give(size, job.Submit(r, 2, b), r, 2, b);
  }
  job.Settle();
  for (int r = 0; r < size; ++r) {
    const Taken taken = Next(job, r);
    REQUIRE(taken.any);
    CHECK(taken.names == std::vector<std::string>{"a", "b"});  // fused, as without
    std::vector<float> want;
    for (uint32_t id : {1u, 2u}) {
      for (int q = 0; q < size; ++q) want.push_back(static_cast<float>(q + 1 + id));
    }
    CHECK(taken.firsts == want);
    CHECK_FALSE(Next(job, r).any);
  }
}

TEST_CASE("An op decided a round after its first announcement still has every rank's input",
          "[core][fastpath][eager]") {
  Job job(2, 1 << 20, {}, Hierarchical::kAuto, {4096, 4096});
  const FastSpec a = Spec("a", 4);
  job.LearnEverywhere(1, a);
  Inputs inputs;
  inputs.Give(2, job.Submit(0, 1, a), 0, 1, a);
  job.Settle();  // round 1: rank 1 answers without it
  CHECK_FALSE(Next(job, 0).any);
  inputs.Give(2, job.Submit(1, 1, a), 1, 1, a);
  job.Settle();  // round 2: rank 0 sends its input again
  for (int r = 0; r < 2; ++r) {
    const Taken taken = Next(job, r);
    REQUIRE(taken.any);
    CHECK(taken.firsts == std::vector<float>{2, 3});
  }
}

TEST_CASE("Without one rank's input, or beyond the budget, the work goes through the data plane",
          "[core][fastpath][eager]") {
  const FastSpec a = Spec("a", 4);  // 16 bytes
  const FastSpec b = Spec("b", 4);
  SECTION("one rank sends none") {
    Job job(3, 1 << 20, {}, Hierarchical::kAuto, {4096, 0, 4096});
    job.LearnEverywhere(1, a);
    Inputs inputs;
    for (int r = 0; r < 3; ++r) {
      inputs.Give(3, job.Submit(r, 1, a), r, 1, a);
    }
    job.Settle();
    for (int r = 0; r < 3; ++r) {
      const Taken taken = Next(job, r);
      REQUIRE(taken.any);
      CHECK(taken.firsts.empty());
    }
  }
  SECTION("a message carries at most KOLO_EAGER_BYTES; a batch with one op short runs as before") {
    Job job(2, 1 << 20, {}, Hierarchical::kAuto, {20, 20});
    job.LearnEverywhere(1, a);
    job.LearnEverywhere(2, b);
    Inputs inputs;
    for (int r = 0; r < 2; ++r) {
      inputs.Give(2, job.Submit(r, 1, a), r, 1, a);
      inputs.Give(2, job.Submit(r, 2, b), r, 2, b);
    }
    const RoundMessage sent = AdvanceFirst(job, 2);
    REQUIRE(sent.eager.inputs.size() == 1);
    CHECK(sent.eager.inputs[0].id == 1);
    CHECK(sent.eager.inputs[0].bytes == 16);
    job.Settle();
    for (int r = 0; r < 2; ++r) {
      const Taken taken = Next(job, r);
      REQUIRE(taken.any);
      CHECK(taken.names.size() == 2);
      CHECK(taken.firsts.empty());
    }
  }
  SECTION("dissemination rounds carry none") {
    Job job(9, 1 << 20, {}, Hierarchical::kAuto, std::vector<int64_t>(9, 4096));
    job.LearnEverywhere(1, a);
    Inputs inputs;
    for (int r = 0; r < 9; ++r) {
      inputs.Give(9, job.Submit(r, 1, a), r, 1, a);
    }
    CHECK(AdvanceFirst(job, 9).eager.empty());
    job.Settle();
    const Taken taken = Next(job, 0);
    REQUIRE(taken.any);
    CHECK(taken.firsts.empty());
  }
}
