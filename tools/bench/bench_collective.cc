// Collectives, their nccl-tests geometry and exact expected outputs; see bench_collective.h.
#include "tools/bench/bench_collective.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "tools/bench/bench_options.h"
#include "tools/bench/bench_pattern.h"

namespace kolo::bench {
namespace {

constexpr int kPeriod = BenchPattern::kPeriod;

// Counts the elements of `count` at `data` that differ from the tiled `period`.
int64_t CountMismatches(const std::vector<unsigned char>& period, const unsigned char* data,
                        int64_t count, size_t element_size) {
  int64_t wrong = 0;
  for (int64_t start = 0; start < count; start += kPeriod) {
    int64_t n = std::min<int64_t>(kPeriod, count - start);
    const unsigned char* got = data + static_cast<size_t>(start) * element_size;
    if (std::memcmp(got, period.data(), static_cast<size_t>(n) * element_size) == 0) continue;
    for (int64_t j = 0; j < n; ++j) {
      size_t at = static_cast<size_t>(j) * element_size;
      if (std::memcmp(got + at, &period[at], element_size) != 0) ++wrong;
    }
  }
  return wrong;
}

}  // namespace

std::string CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllreduce:
      return "allreduce";
    case Collective::kAllgather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReducescatter:
      return "reducescatter";
    case Collective::kAlltoall:
      return "alltoall";
  }
  return "?";
}

bool HasReduceOp(Collective collective) {
  return collective == Collective::kAllreduce || collective == Collective::kReducescatter;
}

std::string RedopName(const BenchOp& op) {
  return HasReduceOp(op.collective) ? BenchOpName(op.reduce) : "none";
}

BenchShape ShapeFor(Collective collective, DataType dtype, int64_t bytes, int size) {
  const auto element_size = static_cast<int64_t>(DataTypeSize(dtype));
  const int64_t n = std::max(size, 1);
  BenchShape shape;
  switch (collective) {
    case Collective::kAllreduce:
    case Collective::kBroadcast:
      shape.count = bytes / element_size;
      shape.input_count = shape.output_count = shape.count;
      shape.bytes = shape.count * element_size;
      break;
    case Collective::kAllgather:
      shape.count = bytes / element_size / n;
      shape.input_count = shape.count;
      shape.output_count = shape.count * n;
      shape.bytes = shape.output_count * element_size;
      break;
    case Collective::kReducescatter:
      shape.count = bytes / element_size / n;
      shape.input_count = shape.count * n;
      shape.output_count = shape.count;
      shape.bytes = shape.input_count * element_size;
      break;
    case Collective::kAlltoall:
      shape.count = bytes / element_size / n;
      shape.input_count = shape.output_count = shape.count * n;
      shape.bytes = shape.output_count * element_size;
      break;
  }
  return shape;
}

double BusBandwidthFactor(Collective collective, int size) {
  const double n = size;
  switch (collective) {
    case Collective::kAllreduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllgather:
    case Collective::kAlltoall:
    case Collective::kReducescatter:
      return (n - 1) / n;
    case Collective::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

double CollectivePattern::GatherValue(DataType dtype, int rank, int j) {
  // 0..60 (-30..30 signed): exact in int8, half and bfloat16; a rank's block is a rotation of
  // its neighbour's, so blocks in the wrong order or place do not match.
  int64_t v = (int64_t{7} * rank + j) % 61;
  return static_cast<double>(dtype == DataType::kUInt8 ? v : v - 30);
}

double CollectivePattern::AlltoallValue(int source, int dest, int j) {
  // 0..10: exact in every dtype, uint8 included. A source's blocks differ in their dest term
  // and a dest's blocks in their source term (3 and 5 are prime to 11), so a block sent to the
  // wrong rank or landing in the wrong place does not match (for up to 11 ranks).
  return static_cast<double>((int64_t{3} * source + int64_t{5} * dest + j) % 11);
}

CollectivePattern::CollectivePattern(const BenchOp& op, DataType dtype, int rank, int size,
                                     int root, const BenchShape& shape)
    : op_(op),
      dtype_(dtype),
      rank_(rank),
      root_(root),
      shape_(shape),
      element_size_(DataTypeSize(dtype)),
      reduce_pattern_(dtype, op.reduce, rank, size) {
  switch (op_.collective) {
    case Collective::kAllreduce:
      break;  // reduce_pattern_ does everything
    case Collective::kAllgather:
      input_ = EncodePeriod([&](int j) { return GatherValue(dtype_, rank_, j); });
      for (int r = 0; r < size; ++r) {
        AddBlock(shape_.count, EncodePeriod([&](int j) { return GatherValue(dtype_, r, j); }));
      }
      break;
    case Collective::kBroadcast:
      input_ = EncodePeriod([&](int j) { return GatherValue(dtype_, root_, j); });
      AddBlock(shape_.count, input_);
      break;
    case Collective::kReducescatter: {
      // The input is the allreduce pattern over every row; this rank keeps rows
      // [rank * count, (rank + 1) * count), whose first element is at this offset in the period.
      const int offset = static_cast<int>((rank_ * shape_.count) % kPeriod);
      AddBlock(shape_.count, EncodePeriod([&](int j) {
                 return reduce_pattern_.ExpectedValue((offset + j) % kPeriod);
               }));
      break;
    }
    case Collective::kAlltoall:
      for (int d = 0; d < size; ++d) {
        std::vector<unsigned char> period =
            EncodePeriod([&](int j) { return AlltoallValue(rank_, d, j); });
        input_blocks_.push_back({shape_.count, std::move(period), {}});
      }
      for (int s = 0; s < size; ++s) {
        AddBlock(shape_.count, EncodePeriod([&](int j) { return AlltoallValue(s, rank_, j); }));
      }
      break;
  }
}

void CollectivePattern::AddBlock(int64_t count, std::vector<unsigned char> period) {
  std::vector<unsigned char> poison = period;
  for (unsigned char& byte : poison) byte = static_cast<unsigned char>(~byte);
  expected_.push_back({count, std::move(period), std::move(poison)});
}

std::vector<unsigned char> CollectivePattern::EncodePeriod(
    const std::function<double(int)>& value) const {
  std::vector<unsigned char> period(kPeriod * element_size_);
  for (int j = 0; j < kPeriod; ++j) EncodeValue(dtype_, value(j), &period[j * element_size_]);
  return period;
}

void CollectivePattern::FillInput(void* data) const {
  if (op_.collective == Collective::kAllreduce || op_.collective == Collective::kReducescatter) {
    reduce_pattern_.FillInput(data, shape_.input_count);
  } else if (op_.collective == Collective::kAlltoall) {
    auto* in = static_cast<unsigned char*>(data);
    for (const Block& block : input_blocks_) {
      size_t bytes = static_cast<size_t>(block.count) * element_size_;
      Tile(block.period, in, bytes);
      in += bytes;
    }
  } else {
    Tile(input_, data, static_cast<size_t>(shape_.input_count) * element_size_);
  }
}

void CollectivePattern::FillPoison(void* data) const {
  if (op_.collective == Collective::kAllreduce) {
    reduce_pattern_.FillPoison(data, shape_.output_count);
    return;
  }
  if (op_.collective == Collective::kBroadcast && rank_ == root_) return;
  auto* out = static_cast<unsigned char*>(data);
  for (const Block& block : expected_) {
    size_t bytes = static_cast<size_t>(block.count) * element_size_;
    Tile(block.poison, out, bytes);
    out += bytes;
  }
}

int64_t CollectivePattern::CountWrong(const void* data) const {
  if (op_.collective == Collective::kAllreduce) {
    return reduce_pattern_.CountWrong(data, shape_.output_count);
  }
  const auto* got = static_cast<const unsigned char*>(data);
  int64_t wrong = 0;
  for (const Block& block : expected_) {
    wrong += CountMismatches(block.period, got, block.count, element_size_);
    got += static_cast<size_t>(block.count) * element_size_;
  }
  return wrong;
}

}  // namespace kolo::bench
