// ReadinessTable::AnnounceIds (cached ids counted in by 64-bit words) against the per-id path
// (AnnounceById, then Announce for what it refuses) over random batches and interleavings:
// the same names ready in the same order, the same errors, the same pending state.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "controller/readiness_table.h"
#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using testing::kT0;
using testing::Meta;

// Name i's cache id: spread over four blocks of 64, with gaps.
uint32_t IdOf(int name) {
  return static_cast<uint32_t>(1 + name * 3);
}
std::string NameOf(int name) {
  return "t" + std::to_string(name);
}

struct Batch {
  int rank = 0;
  std::vector<int> names;  // in the order announced
  std::vector<bool> full;  // parallel: announced with full metadata, not by id
};

// Every rank announces every name once per step, in batches of 1-40, each batch ascending (a
// run, as on the wire) or shuffled; the ranks' batches interleaved at random. Some names are
// announced in full (so the id is not the first announcement's), and one batch in 8 repeats
// a name it already holds (a protocol error both paths must report).
std::vector<Batch> Step(int size, int num_names, std::mt19937* rng) {
  std::vector<std::vector<Batch>> per_rank(size);
  for (int r = 0; r < size; ++r) {
    std::vector<int> order(num_names);
    for (int n = 0; n < num_names; ++n) order[n] = n;
    std::shuffle(order.begin(), order.end(), *rng);
    for (size_t at = 0; at < order.size();) {
      const size_t n = std::min<size_t>(order.size() - at, 1 + (*rng)() % 40);
      Batch batch{r, {order.begin() + at, order.begin() + at + n}, {}};
      if ((*rng)() % 2 == 0) std::sort(batch.names.begin(), batch.names.end());
      if ((*rng)() % 8 == 0) batch.names.push_back(batch.names[(*rng)() % batch.names.size()]);
      for (size_t i = 0; i < batch.names.size(); ++i) batch.full.push_back((*rng)() % 16 == 0);
      per_rank[r].push_back(std::move(batch));
      at += n;
    }
  }
  std::vector<Batch> out;
  std::vector<size_t> next(size, 0);
  size_t left = 0;
  for (const auto& batches : per_rank) left += batches.size();
  while (left > 0) {
    const int r = static_cast<int>((*rng)() % size);
    if (next[r] < per_rank[r].size()) {
      out.push_back(per_rank[r][next[r]++]);
      --left;
    }
  }
  return out;
}

struct Outcome {
  std::vector<std::string> ready;  // name, or name and error
  std::vector<std::string> errors;
};

void Record(const std::vector<ReadyTensor>& ready, Outcome* out) {
  for (const ReadyTensor& t : ready) out->ready.push_back(t.meta.name + " " + t.error);
}

// Applies `batch` as Negotiator::AddRequests does, by words (AnnounceIds) or per id; stops at
// the first protocol error, as the Controller does.
void Apply(const Batch& batch, bool by_words, ReadinessTable* table, Outcome* out) {
  std::vector<ReadyTensor> ready;
  for (size_t i = 0; i < batch.names.size(); ++i) {
    const int name = batch.names[i];
    if (!batch.full[i]) {
      if (by_words) {
        std::vector<uint32_t> ids;
        for (size_t j = i; j < batch.names.size() && !batch.full[j]; ++j) {
          ids.push_back(IdOf(batch.names[j]));
        }
        i += table->AnnounceIds(batch.rank, ids.data(), ids.size(), &ready);
        if (i == batch.names.size()) break;  // else names[i] is refused, or in full
      } else if (table->AnnounceById(batch.rank, IdOf(name), &ready)) {
        continue;
      }
    }
    const uint32_t id = batch.full[i] ? 0 : IdOf(batch.names[i]);
    Status status =
        table->Announce(batch.rank, Meta(NameOf(batch.names[i])), kT0, &ready, nullptr, id);
    if (!status.ok()) {
      out->errors.push_back(status.message());
      break;
    }
  }
  Record(ready, out);
}

TEST_CASE("AnnounceIds ends as AnnounceById per id does, over random batches and interleavings",
          "[controller][readiness][cache]") {
  const int size = GENERATE(1, 2, 3, 7);
  const unsigned seed = GENERATE(1u, 2u, 3u, 4u, 5u, 6u);
  constexpr int kNames = 80;  // ids 1..238: four blocks of 64
  CAPTURE(size, seed);
  std::mt19937 rng(seed);
  ReadinessTable words(size);
  ReadinessTable per_id(size);
  Outcome by_words;
  Outcome by_id;
  for (int step = 0; step < 4; ++step) {
    for (const Batch& batch : Step(size, kNames, &rng)) {
      Apply(batch, /*by_words=*/true, &words, &by_words);
      Apply(batch, /*by_words=*/false, &per_id, &by_id);
      REQUIRE(by_words.ready == by_id.ready);
      REQUIRE(by_words.errors == by_id.errors);
      REQUIRE(words.pending_count() == per_id.pending_count());
    }
    for (int n = 0; n < kNames; ++n) {
      CHECK(words.MissingRanks(NameOf(n)) == per_id.MissingRanks(NameOf(n)));
    }
  }
  CHECK(by_words.ready.size() >= static_cast<size_t>(kNames));
  // The repeated names: the error path was exercised (with one rank a name completes at once).
  if (size > 1) CHECK_FALSE(by_words.errors.empty());
}

TEST_CASE("AnnounceIds stops at a refused id and counts nothing for a rank that may not",
          "[controller][readiness][cache]") {
  ReadinessTable table(2);
  std::vector<ReadyTensor> ready;
  for (uint32_t id : {5u, 6u, 70u}) {
    REQUIRE(table.Announce(0, Meta("n" + std::to_string(id)), kT0, &ready, nullptr, id).ok());
  }
  const std::vector<uint32_t> ids{5, 6, 7, 70};
  CHECK(table.AnnounceIds(3, ids.data(), ids.size(), &ready) == 0);  // out of range
  CHECK(table.AnnounceIds(1, ids.data(), ids.size(), &ready) == 2);  // 7 is not pending
  REQUIRE(ready.size() == 2);
  CHECK(ready[0].meta.name == "n5");
  CHECK(ready[1].meta.name == "n6");
  CHECK(table.AnnounceIds(1, ids.data() + 3, 1, &ready) == 1);
  CHECK(ready.back().meta.name == "n70");
  CHECK(table.pending_count() == 0);
}

}  // namespace
}  // namespace kolo::controller
