// Tests of ops/ring_exchange.h without a network: n RingExchanges are pumped through bounded
// in-memory pipes in random-sized pieces (down to single bytes, so partial elements and every
// pipelining gate are exercised), and every rank's buffer must end fully reduced.
#include "ops/ring_exchange.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "tests/ops/ring_reference.h"

namespace kolo::ops {
namespace {

using testing::ElementBuffer;

struct PumpOptions {
  size_t pipe_capacity = 1;  // bytes a link buffers, like a socket's buffers
  size_t max_move = 1;       // most bytes moved at once
};

// Moves bytes until no exchange can progress. Returns true if every stream completed.
bool Pump(std::vector<std::unique_ptr<RingExchange>>& ranks, const PumpOptions& options,
          std::mt19937& rng) {
  const int n = static_cast<int>(ranks.size());
  std::vector<std::deque<uint8_t>> pipes(n);  // pipes[r]: from rank r to rank r+1
  std::uniform_int_distribution<size_t> amount(1, options.max_move);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      std::deque<uint8_t>& out = pipes[r];
      const ConstBytes send = ranks[r]->NextSend();
      if (send.size > 0 && out.size() < options.pipe_capacity) {
        const size_t m = std::min({send.size, options.pipe_capacity - out.size(), amount(rng)});
        const uint8_t* bytes = static_cast<const uint8_t*>(send.data);
        out.insert(out.end(), bytes, bytes + m);
        ranks[r]->OnSent(m);
        progress = true;
      }
      std::deque<uint8_t>& in = pipes[(r - 1 + n) % n];
      const MutableBytes recv = ranks[r]->NextRecv();
      if (recv.size > 0 && !in.empty()) {
        const size_t m = std::min({recv.size, in.size(), amount(rng)});
        std::copy(in.begin(), in.begin() + m, static_cast<uint8_t*>(recv.data));
        in.erase(in.begin(), in.begin() + m);
        ranks[r]->OnReceived(m);
        progress = true;
      }
    }
  }
  bool done = true;
  for (int r = 0; r < n; ++r) done = done && ranks[r]->done() && pipes[r].empty();
  return done;
}

void RunRing(int n, size_t count, DataType dtype, ReduceOp op, size_t scratch_bytes,
             const PumpOptions& options) {
  std::mt19937 rng(static_cast<uint32_t>(n * 1000 + count));
  std::vector<ElementBuffer> buffers;
  std::vector<std::unique_ptr<RingScratch>> scratches;
  std::vector<std::unique_ptr<RingExchange>> ranks;
  for (int r = 0; r < n; ++r) buffers.push_back(testing::MakeRankInput(dtype, op, r, count));
  for (int r = 0; r < n; ++r) {
    scratches.push_back(std::make_unique<RingScratch>(scratch_bytes));
    ranks.push_back(
        std::make_unique<RingExchange>(buffers[r].data(), count, dtype, op, r, n, *scratches[r]));
  }
  for (int r = 0; r < n; ++r) {
    REQUIRE(ranks[r]->send_total() == ranks[(r + 1) % n]->recv_total());
  }
  INFO("n " << n << " count " << count << " " << DataTypeName(dtype) << " " << ReduceOpName(op)
            << " scratch " << scratch_bytes << " pipe " << options.pipe_capacity << " move "
            << options.max_move);
  REQUIRE(Pump(ranks, options, rng));
  const ElementBuffer expected = testing::MakeReduced(dtype, op, n, count);
  for (int r = 0; r < n; ++r) REQUIRE(testing::BytesEqual(buffers[r], expected));
}

TEST_CASE("ring exchanges reduce every dtype and op through byte-sized pieces", "[ops][ring]") {
  const int n = GENERATE(range(1, 9));
  const size_t count = GENERATE(size_t{0}, size_t{1}, size_t{13}, size_t{64}, size_t{203});
  const ReduceOp op = GENERATE(ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                               ReduceOp::kProduct);
  for (int d = 0; d < kNumDataTypes; ++d) {
    const DataType dtype = static_cast<DataType>(d);
    RunRing(n, count, dtype, op, RingScratch::kMinBytes, {1, 1});
    RunRing(n, count, dtype, op, 67, {13, 11});
  }
}

TEST_CASE("ring exchanges pipeline large buffers through a small scratch", "[ops][ring]") {
  const int n = GENERATE(2, 3, 5, 8);
  const size_t count = GENERATE(size_t{4099}, size_t{20011});
  const DataType dtype = GENERATE(DataType::kFloat64, DataType::kFloat16, DataType::kInt32);
  const PumpOptions options =
      GENERATE(PumpOptions{1000, 333}, PumpOptions{65536, 65536}, PumpOptions{7, 3});
  RunRing(n, count, dtype, ReduceOp::kSum, 1003, options);
}

}  // namespace
}  // namespace kolo::ops
