// Integer prescale/postscale and bool's reduce ops through the public API, as Horovod defines
// them: integers scale in double and truncate toward zero (each rank's prescaled input, then the
// result; an average divides together with the postscale), bool reduces by or / and and has no
// average. 1-4 ranks over TCP and shared memory, single tensors in and out of place and fused
// ones, every result checked exactly.
#include <catch2/catch.hpp>
#include <cmath>
#include <future>
#include <limits>
#include <memory>

#include "core/config/config_table.h"
#include "tests/support/element_codec.h"
#include "tests/support/local_job.h"
#include "tests/support/reference_reduce.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::ElementBuffer;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

constexpr DataType kIntegerTypes[] = {DataType::kUInt8, DataType::kInt8,  DataType::kUInt16,
                                      DataType::kInt16, DataType::kInt32, DataType::kInt64};

bool IsUnsigned(DataType dtype) {
  return dtype == DataType::kUInt8 || dtype == DataType::kUInt16;
}

// Small integers, so that nothing wraps: for products, 2 on at most one of 4 ranks and +-1
// elsewhere (|product| <= 5 * 2^3 = 40 after a prescale of 2.5).
double Input(DataType dtype, ReduceOp op, int rank, int64_t i) {
  if (op == ReduceOp::kProduct) {
    if ((i + rank) % 4 == 0) return 2;
    return (!IsUnsigned(dtype) && (i + rank) % 3 == 0) ? -1 : 1;
  }
  const double v = static_cast<double>((i * 5 + rank * 3) % 13);  // 0..12
  return IsUnsigned(dtype) ? v : v - 6;
}

// The truncated value `x` held to the dtype's range (kolo saturates instead of wrapping).
double Saturate(DataType dtype, double x) {
  const double bits = 8.0 * static_cast<double>(DataTypeSize(dtype));
  const double hi = IsUnsigned(dtype) ? std::ldexp(1.0, static_cast<int>(bits)) - 1
                                      : std::ldexp(1.0, static_cast<int>(bits) - 1) - 1;
  const double lo = IsUnsigned(dtype) ? 0 : -hi - 1;
  return std::min(hi, std::max(lo, std::trunc(x)));
}

struct Scaling {
  double prescale;
  double postscale;
};

// Horovod's integer scaling, written out: each rank contributes trunc(v * prescale); the result
// is trunc(reduced * postscale), or trunc(reduced * (postscale / ranks)) for an average (exact
// division when postscale is 1, equal to that for these sizes and values).
double Expected(DataType dtype, ReduceOp op, Scaling scale, int n, int64_t i) {
  double reduced = Saturate(dtype, Input(dtype, op, 0, i) * scale.prescale);
  for (int r = 1; r < n; ++r) {
    const double v = Saturate(dtype, Input(dtype, op, r, i) * scale.prescale);
    reduced = kolo::testing::ReferenceReduce(op, reduced, v, dtype);
  }
  const double result =
      op == ReduceOp::kAverage ? reduced * (scale.postscale / n) : reduced * scale.postscale;
  return Saturate(dtype, result);
}

struct Tensor {
  std::unique_ptr<ElementBuffer> input, output;
  int64_t count = 0;
  bool in_place = false;
  std::promise<Status> done;
};

// Three tensors of one dtype, op and scaling at once (one in place), so that they fuse or run
// alone depending on the timing; then checks every element.
std::string CheckScaled(Runtime& rt, DataType dtype, ReduceOp op, Scaling scale, int round) {
  const int64_t counts[] = {1, 17, 1031};
  std::vector<std::unique_ptr<Tensor>> tensors;
  AllreduceOptions options;
  options.op = op;
  options.prescale = scale.prescale;
  options.postscale = scale.postscale;
  const std::string prefix = DataTypeName(dtype) + "/" + ReduceOpName(op) + "/" +
                             std::to_string(scale.prescale) + "/" +
                             std::to_string(scale.postscale) + "/" + std::to_string(round) + "/";
  for (size_t t = 0; t < 3; ++t) {
    auto tensor = std::make_unique<Tensor>();
    tensor->count = counts[t];
    tensor->in_place = t == 1;
    tensor->input = std::make_unique<ElementBuffer>(dtype, counts[t]);
    tensor->output = std::make_unique<ElementBuffer>(dtype, counts[t]);
    for (int64_t i = 0; i < counts[t]; ++i) {
      tensor->input->Set(i, Input(dtype, op, rt.rank(), i));
    }
    const TensorView in{tensor->input->data(), dtype, {counts[t]}, Device::Cpu()};
    TensorView out = in;
    if (!tensor->in_place) out.data = tensor->output->data();
    Tensor* raw = tensor.get();
    Status s = rt.AllreduceAsync(prefix + std::to_string(t), in, out, options,
                                 [raw](const Status& st) { raw->done.set_value(st); });
    if (!s.ok()) return prefix + std::to_string(t) + ": " + s.ToString();
    tensors.push_back(std::move(tensor));
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    Tensor& tensor = *tensors[t];
    Status s = tensor.done.get_future().get();
    if (!s.ok()) return prefix + std::to_string(t) + ": " + s.ToString();
    const ElementBuffer& result = tensor.in_place ? *tensor.input : *tensor.output;
    for (int64_t i = 0; i < tensor.count; ++i) {
      const double want = Expected(dtype, op, scale, rt.size(), i);
      if (result.Get(i) != want) {
        return prefix + std::to_string(t) + ": element " + std::to_string(i) + " is " +
               std::to_string(result.Get(i)) + ", expected " + std::to_string(want);
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Integer prescale and postscale truncate toward zero, as Horovod does",
          "[runtime][allreduce][scaling]") {
  const int n = GENERATE(1, 2, 3, 4);
  const std::string transport = GENERATE("tcp", "auto");
  Watchdog watchdog("integer scaling with " + std::to_string(n) + " ranks over " + transport,
                    std::chrono::seconds(120));
  LocalJob job(n, [&](Options& o) {
    o.transport = *TransportFromName(transport);
    o.cycle_time_ms = 5;
  });
  // 2.5 and 0.3 truncate (2.5 * 3 = 7.5 -> 7, -7.5 -> -7); a negative factor on an unsigned
  // type saturates at 0; 40 overflows int8 and saturates.
  const Scaling scalings[] = {{2.5, 0.3}, {0.5, -2.0}, {1.0, 40.0}};
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    for (int round = 0; round < 2; ++round) {  // the second round goes by cache id (fast path)
      for (DataType dtype : kIntegerTypes) {
        for (ReduceOp op : kolo::testing::kAllOps) {
          for (const Scaling& scale : scalings) {
            std::string e = CheckScaled(rt, dtype, op, scale, round);
            if (!e.empty()) return e;
          }
        }
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("An integer average with a postscale divides in the same rounding",
          "[runtime][allreduce][scaling]") {
  Watchdog watchdog("integer average with postscale", std::chrono::seconds(60));
  LocalJob job(3);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    // Sums over the 3 ranks: 19, -19, 3.
    const int32_t v = rt.rank() == 0 ? 5 : 7;
    const std::vector<int32_t> input = {v, -v, 1};
    std::vector<int32_t> x = input;
    TensorView view{x.data(), DataType::kInt32, {3}, Device::Cpu()};
    AllreduceOptions options;
    options.op = ReduceOp::kAverage;
    options.postscale = 3.0;
    Status s = rt.Allreduce("avg/three", view, view, options);
    if (!s.ok()) return s.ToString();
    // trunc(19 * 3 / 3) = 19, where dividing first would give trunc(19 / 3) * 3 = 18.
    if (x != std::vector<int32_t>{19, -19, 3}) return "postscale 3: wrong result";
    x = input;
    options.postscale = 0.5;
    s = rt.Allreduce("avg/half", view, view, options);
    if (!s.ok()) return s.ToString();
    // trunc(19 * 0.5 / 3) = trunc(3.17) = 3; trunc(3 * 0.5 / 3) = trunc(0.5) = 0.
    if (x != std::vector<int32_t>{3, -3, 0}) return "postscale 0.5: wrong result";
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("bool: sum and max are or, min and product are and; average and scaling refused",
          "[runtime][allreduce][bool]") {
  const int n = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("bool allreduce with " + std::to_string(n) + " ranks",
                    std::chrono::seconds(60));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    // Element i is true on rank r when bit r of i is set: or is "any bit below n", and "all".
    const int64_t count = int64_t{1} << n;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct}) {
      std::vector<uint8_t> flags(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) flags[i] = (i >> rt.rank()) & 1;
      TensorView view{flags.data(), DataType::kBool, {count}, Device::Cpu()};
      AllreduceOptions options;
      options.op = op;
      Status s = rt.Allreduce("flags/" + ReduceOpName(op), view, view, options);
      if (!s.ok()) return s.ToString();
      const bool is_or = op == ReduceOp::kSum || op == ReduceOp::kMax;
      for (int64_t i = 0; i < count; ++i) {
        const uint8_t want = is_or ? (i != 0) : (i == count - 1);
        if (flags[i] != want) {
          return ReduceOpName(op) + ": element " + std::to_string(i) + " is " +
                 std::to_string(flags[i]);
        }
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});

  uint8_t flags[2] = {1, 0};
  TensorView view{flags, DataType::kBool, {2}, Device::Cpu()};
  AllreduceOptions average;
  average.op = ReduceOp::kAverage;
  Status s = job.rank(0).AllreduceAsync("avg", view, view, average, [](const Status&) {});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() ==
        "allreduce 'avg': bool tensors have no average; use sum or max (logical or) or min or "
        "product (logical and)");
  s = job.rank(0).ReducescatterAsync("avg", view, view, average, [](const Status&) {});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  AllreduceOptions scaled;
  scaled.prescale = 2.0;
  s = job.rank(0).AllreduceAsync("scaled", view, view, scaled, [](const Status&) {});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("bool tensors cannot be scaled"));
}

TEST_CASE("Reducescatter scales integers as allreduce does", "[runtime][reducescatter][scaling]") {
  const int n = GENERATE(1, 2, 3, 4);
  Watchdog watchdog("integer reducescatter scaling with " + std::to_string(n) + " ranks",
                    std::chrono::seconds(60));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    const int64_t rows = 4 * n + 3, cols = 5;
    for (DataType dtype : kIntegerTypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin}) {
        const Scaling scale{2.5, op == ReduceOp::kAverage ? 3.0 : 0.3};
        ElementBuffer input(dtype, rows * cols);
        for (int64_t i = 0; i < rows * cols; ++i) input.Set(i, Input(dtype, op, rt.rank(), i));
        const std::vector<int64_t> part = ReducescatterShape({rows, cols}, rt.rank(), n);
        ElementBuffer output(dtype, part[0] * cols);
        AllreduceOptions options;
        options.op = op;
        options.prescale = scale.prescale;
        options.postscale = scale.postscale;
        const std::string name = "rs/" + DataTypeName(dtype) + "/" + ReduceOpName(op);
        Status s = rt.Reducescatter(name, {input.data(), dtype, {rows, cols}, Device::Cpu()},
                                    {output.data(), dtype, part, Device::Cpu()}, options);
        if (!s.ok()) return name + ": " + s.ToString();
        int64_t first = 0;
        for (int r = 0; r < rt.rank(); ++r) first += ReducescatterShape({rows, cols}, r, n)[0];
        for (int64_t i = 0; i < part[0] * cols; ++i) {
          const double want = Expected(dtype, op, scale, n, first * cols + i);
          if (output.Get(i) != want) {
            return name + ": element " + std::to_string(i) + " is " +
                   std::to_string(output.Get(i)) + ", expected " + std::to_string(want);
          }
        }
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}
