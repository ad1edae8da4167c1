// The fast path's staged inputs (docs/FAST-PATH.md, "Staged inputs") as plain data: which round
// messages stage their op (a lone job's allreduce), and which decided work says every rank
// staged it alike (Response::staged, the same on every rank); else none.
#include <catch2/catch.hpp>
#include <optional>
#include <vector>

#include "core/loop/fast_path.h"
#include "tests/core/fast_path_job.h"

using namespace kolo;
using namespace kolo::testing;

namespace {

// Gives every rank of `job` a stager that stages for exchange `exchange[r]` (nullopt: refuses)
// and counts its calls in `calls[r]`.
void Stage(Job& job, const std::vector<std::optional<uint64_t>>& exchange,
           std::vector<int>* calls) {
  calls->assign(exchange.size(), 0);
  for (size_t r = 0; r < exchange.size(); ++r) {
    job.StageWith(static_cast<int>(r),
                  [r, &exchange, calls](const OpSignature& op, const TensorEntry& entry) {
                    ++(*calls)[r];
                    CHECK(op.op == OpType::kAllreduce);
                    CHECK(entry.meta.name == "a");
                    return exchange[r];
                  });
  }
}

// Rank r's next work's staged exchange; REQUIREs that there is work.
std::optional<uint64_t> NextStaged(Job& job, int r) {
  FastPath::Work work;
  REQUIRE(job.at(r).NextWork(job.clock().Now(), &work));
  return work.response.staged;
}

}  // namespace

TEST_CASE("A lone allreduce every rank staged alike runs staged on every rank",
          "[core][fastpath][staged]") {
  const int size = GENERATE(2, 4, 9);  // 9: dissemination combines the messages
  Job job(size);
  const FastSpec a = Spec("a", 1024);
  job.LearnEverywhere(1, a);
  const std::vector<std::optional<uint64_t>> exchange(size, 7);
  std::vector<int> calls;
  Stage(job, exchange, &calls);
  for (int r = 0; r < size; ++r) job.Submit(r, 1, a);
  job.Settle();
  for (int r = 0; r < size; ++r) {
    CHECK(calls[r] == 1);
    CHECK(NextStaged(job, r) == std::optional<uint64_t>(7));
  }
}

TEST_CASE("A round where some rank did not stage, or staged for another exchange, runs as before",
          "[core][fastpath][staged]") {
  const FastSpec a = Spec("a", 1024);
  const std::vector<std::optional<uint64_t>> exchange =
      GENERATE(std::vector<std::optional<uint64_t>>{7, std::nullopt, 7},
               std::vector<std::optional<uint64_t>>{7, 8, 7});
  Job job(3);
  job.LearnEverywhere(1, a);
  std::vector<int> calls;
  Stage(job, exchange, &calls);
  for (int r = 0; r < 3; ++r) job.Submit(r, 1, a);
  job.Settle();
  for (int r = 0; r < 3; ++r) CHECK_FALSE(NextStaged(job, r).has_value());
}

TEST_CASE("Only a message that reports one op, the job's allreduce, stages it",
          "[core][fastpath][staged]") {
  const FastSpec a = Spec("a", 1024);
  std::vector<int> calls;
  const std::vector<std::optional<uint64_t>> exchange(2, 3);
  SECTION("two ops ready: neither is staged, and they fuse as before") {
    Job job(2);
    job.LearnEverywhere(1, a);
    job.LearnEverywhere(2, Spec("b", 16));
    Stage(job, exchange, &calls);
    for (int r = 0; r < 2; ++r) {
      job.Submit(r, 1, a);
      job.Submit(r, 2, Spec("b", 16));
    }
    job.Settle();
    for (int r = 0; r < 2; ++r) {
      CHECK(calls[r] == 0);
      FastPath::Work work;
      REQUIRE(job.at(r).NextWork(job.clock().Now(), &work));
      CHECK(work.response.names.size() == 2);
      CHECK_FALSE(work.response.staged.has_value());
    }
  }
  SECTION("a broadcast is not staged") {
    Job job(2);
    job.LearnEverywhere(1, BroadcastSpec("a", 1024, 0));
    Stage(job, exchange, &calls);
    for (int r = 0; r < 2; ++r) job.Submit(r, 1, BroadcastSpec("a", 1024, 0));
    job.Settle();
    for (int r = 0; r < 2; ++r) {
      CHECK(calls[r] == 0);
      CHECK_FALSE(NextStaged(job, r).has_value());
    }
  }
  SECTION("a rank ahead stages again in the round that decides it") {
    Job job(2);
    job.LearnEverywhere(1, a);
    Stage(job, exchange, &calls);
    job.Submit(0, 1, a);
    job.Settle();  // round 1: rank 1 answers without it
    job.Submit(1, 1, a);
    job.Settle();  // round 2
    CHECK(calls[0] == 2);
    CHECK(calls[1] == 1);
    for (int r = 0; r < 2; ++r) CHECK(NextStaged(job, r) == std::optional<uint64_t>(3));
  }
}
