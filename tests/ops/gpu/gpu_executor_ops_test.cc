// GpuExecutor's ops against the simulated device and collectives, 1-4 ranks as threads: every op
// kind equals the CPU reference (float32, int32, float16), fused and single, in and out of
// place; scale factors; a joined rank's stand-in. Fixture: tests/ops/gpu/gpu_executor_rank.h.
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/op_validation.h"
#include "ops/gpu/gpu_executor.h"
#include "tests/ops/gpu/gpu_executor_rank.h"
#include "tests/support/sim_gpu/sim_star_link.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::gpu;
using namespace kolo::gpu::executor_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("Allreduce of one tensor equals the CPU reference, in place and out of place",
          "[gpu-sim][gpu-executor]") {
  const int size = GENERATE(1, 3);
  const DataType dtype = GENERATE(DataType::kFloat32, DataType::kInt32, DataType::kFloat16);
  kolo::testing::Watchdog watchdog("single allreduce", 120s);
  RequireAllPassed(RunRanks(size, [dtype](ExecRank& rank) -> std::string {
    for (ReduceOp op : kolo::testing::kAllOps) {
      for (bool in_place : {true, false}) {
        const int64_t count = 1021;
        const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
        void* in = rank.Upload(kolo::testing::MakeInput(dtype, count, rank.rank(), op));
        void* out = in_place ? in : rank.Alloc(bytes);
        auto e = Entry("t", OpType::kAllreduce, dtype, {count}, in, out);
        Response response = MakeResponse(OpType::kAllreduce, dtype, {e.get()});
        response.reduce_op = op;
        const Status s = Run(rank.exec(), response, {e.get()});
        if (!s.ok()) return s.ToString();
        const std::string bad =
            kolo::testing::CheckAllreduce(rank.Download(out, bytes), dtype, count, rank.size(), op);
        if (!bad.empty()) return bad + (in_place ? " (in place)" : " (out of place)");
        if (!in_place &&
            rank.Download(in, bytes) != kolo::testing::MakeInput(dtype, count, rank.rank(), op)) {
          return "the input changed";
        }
      }
    }
    return "";
  }));
}

TEST_CASE("Fused allreduce goes through the fusion buffer, or a buffer of its own past it",
          "[gpu-sim][gpu-executor]") {
  const size_t fusion_bytes = GENERATE(size_t{1} << 20, size_t{64});
  kolo::testing::Watchdog watchdog("fused allreduce", 120s);
  RequireAllPassed(RunRanks(
      3,
      [](ExecRank& rank) -> std::string {
        for (DataType dtype : {DataType::kFloat32, DataType::kInt32, DataType::kFloat16}) {
          for (ReduceOp op : kolo::testing::kAllOps) {
            const std::vector<int64_t> counts = {7, 0, 300, 1};
            std::vector<std::unique_ptr<TensorEntry>> owned;
            std::vector<TensorEntry*> entries;
            std::vector<void*> outs;
            for (size_t t = 0; t < counts.size(); ++t) {
              void* in = rank.Upload(kolo::testing::MakeInput(dtype, counts[t], rank.rank(), op));
              // Odd tensors out of place.
              void* out = t % 2 == 1 ? rank.Alloc(counts[t] * DataTypeSize(dtype)) : in;
              owned.push_back(
                  Entry("f" + std::to_string(t), OpType::kAllreduce, dtype, {counts[t]}, in, out));
              entries.push_back(owned.back().get());
              outs.push_back(out);
            }
            Response response = MakeResponse(OpType::kAllreduce, dtype, entries);
            response.reduce_op = op;
            PhaseLog phases;
            const Status s = Run(rank.exec(), response, entries, &phases);
            if (!s.ok()) return s.ToString();
            for (size_t t = 0; t < counts.size(); ++t) {
              const std::string bad = kolo::testing::CheckAllreduce(
                  rank.Download(outs[t], counts[t] * DataTypeSize(dtype)), dtype, counts[t],
                  rank.size(), op);
              if (!bad.empty()) return "tensor " + std::to_string(t) + ": " + bad;
            }
            const std::vector<std::string> want = {"MEMCPY_IN_FUSION_BUFFER", "NCCL_ALLREDUCE",
                                                   "MEMCPY_OUT_FUSION_BUFFER"};
            if (phases.names() != want) return "phases differ";
          }
        }
        return "";
      },
      [fusion_bytes](int) {
        RankOptions options;
        options.fusion_bytes = fusion_bytes;
        return options;
      }));
}

TEST_CASE("Scale factors fold into one prescale for sums and averages; others are refused",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("scaled allreduce", 60s);
  RequireAllPassed(RunRanks(2, [](ExecRank& rank) -> std::string {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        for (size_t tensors : {1, 2}) {
          const int64_t count = 100;
          std::vector<std::unique_ptr<TensorEntry>> owned;
          std::vector<TensorEntry*> entries;
          for (size_t t = 0; t < tensors; ++t) {
            void* in = rank.Upload(kolo::testing::MakeInput(dtype, count, rank.rank(), op));
            owned.push_back(Entry("s" + std::to_string(t), OpType::kAllreduce, dtype, {count}, in));
            entries.push_back(owned.back().get());
          }
          Response response = MakeResponse(OpType::kAllreduce, dtype, entries);
          response.reduce_op = op;
          response.prescale = 0.5;
          response.postscale = 4.0;
          const Status s = Run(rank.exec(), response, entries);
          if (!s.ok()) return s.ToString();
          for (const TensorEntry* e : entries) {
            const std::string bad = Compare(
                rank.Download(e->output.data, count * DataTypeSize(dtype)), dtype,
                [&](size_t i) {
                  return 2.0 * kolo::testing::ExpectedAllreduce(rank.size(),
                                                                static_cast<int64_t>(i), op, dtype);
                },
                DataTypeName(dtype) + " " + ReduceOpName(op));
            if (!bad.empty()) return bad;
          }
        }
      }
    }
    return "";
  }));
  // Refused before anything is enqueued: NCCL has no scaled min, and no integer scaling.
  RequireAllPassed(RunRanks(1, [](ExecRank& rank) -> std::string {
    void* in = rank.Alloc(16);
    auto f = Entry("m", OpType::kAllreduce, DataType::kFloat32, {4}, in);
    Response min = MakeResponse(OpType::kAllreduce, DataType::kFloat32, {f.get()});
    min.reduce_op = ReduceOp::kMin;
    min.postscale = 2.0;
    const Status refused = rank.exec().Launch(min, {f.get()}, nullptr, [](const Status&) {});
    if (refused.code() != StatusCode::kInvalidArgument ||
        refused.message() !=
            "allreduce 'm': scale factors other than 1 with min are not supported on GPU "
            "tensors: NCCL scales only sums and averages (ncclRedOpCreatePreMulSum)") {
      return refused.ToString();
    }
    auto i = Entry("i", OpType::kAllreduce, DataType::kInt32, {4}, in);
    Response scaled = MakeResponse(OpType::kAllreduce, DataType::kInt32, {i.get()});
    scaled.prescale = 0.5;
    const Status integer = rank.exec().Launch(scaled, {i.get()}, nullptr, [](const Status&) {});
    if (integer.message() !=
        "allreduce 'i': scale factors other than 1 need a floating-point dtype, not int32") {
      return integer.ToString();
    }
    return rank.exec().pending() == 0 ? "" : "a refused op is pending";
  }));
}

TEST_CASE("Broadcast copies the root's tensor to every rank", "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("broadcast", 60s);
  RequireAllPassed(RunRanks(3, [](ExecRank& rank) -> std::string {
    const DataType dtype = DataType::kInt32;
    const size_t count = 257;
    const auto value = [](int r) { return [r](size_t i) { return 1000.0 * r + i; }; };
    void* in = rank.Upload(Bytes(dtype, count, value(rank.rank())));
    void* out = rank.rank() == 2 ? rank.Alloc(count * 4) : in;  // out of place on one rank
    auto e = Entry("b", OpType::kBroadcast, dtype, {static_cast<int64_t>(count)}, in, out);
    Response response = MakeResponse(OpType::kBroadcast, dtype, {e.get()});
    response.root = 1;
    PhaseLog phases;
    const Status s = Run(rank.exec(), response, {e.get()}, &phases);
    if (!s.ok()) return s.ToString();
    if (phases.names() != std::vector<std::string>{"NCCL_BROADCAST"}) return "phases differ";
    return Compare(rank.Download(out, count * 4), dtype, value(1), "broadcast");
  }));
}

TEST_CASE("Allgather concatenates each rank's rows, equal or not, single or fused",
          "[gpu-sim][gpu-executor]") {
  const bool equal_rows = GENERATE(true, false);
  const size_t tensors = GENERATE(size_t{1}, size_t{2});
  kolo::testing::Watchdog watchdog("allgather", 60s);
  RequireAllPassed(RunRanks(3, [=](ExecRank& rank) -> std::string {
    const int n = rank.size();
    const DataType dtype = DataType::kFloat32;
    const int64_t cols = 3;
    // Rows of tensor t on rank r (rank 1 sends none of tensor 0 when they differ).
    const auto rows = [&](size_t t, int r) -> int64_t {
      return equal_rows ? 2 : static_cast<int64_t>((r + t) % 3);
    };
    const auto value = [](size_t t, int r, size_t i) { return 10000.0 * t + 100.0 * r + i; };
    std::vector<std::unique_ptr<TensorEntry>> owned;
    std::vector<TensorEntry*> entries;
    std::vector<std::vector<void*>> allocated(tensors);
    Response response;
    response.op = OpType::kAllgather;
    response.dtype = dtype;
    for (size_t t = 0; t < tensors; ++t) {
      const int64_t mine = rows(t, rank.rank());
      void* in = rank.Upload(Bytes(dtype, static_cast<size_t>(mine * cols),
                                   [&](size_t i) { return value(t, rank.rank(), i); }));
      owned.push_back(Entry("g" + std::to_string(t), OpType::kAllgather, dtype, {mine, cols}, in));
      TensorEntry* e = owned.back().get();
      e->output = TensorView{};
      e->allocate = [&rank, &allocated, t](const std::vector<int64_t>& shape) -> void* {
        int64_t elements = 1;
        for (int64_t d : shape) elements *= d;
        allocated[t].push_back(rank.Alloc(static_cast<size_t>(elements) * 4));
        return allocated[t].back();
      };
      entries.push_back(e);
      response.names.push_back(e->meta.name);
    }
    for (size_t t = 0; t < tensors; ++t) {
      for (int r = 0; r < n; ++r) response.first_dims.push_back(rows(t, r));
    }
    const Status s = Run(rank.exec(), response, entries);
    if (!s.ok()) return s.ToString();
    for (size_t t = 0; t < tensors; ++t) {
      const TensorEntry& e = *entries[t];
      int64_t total = 0;
      std::vector<double> want;
      for (int r = 0; r < n; ++r) {
        total += rows(t, r);
        for (int64_t i = 0; i < rows(t, r) * cols; ++i) {
          want.push_back(value(t, r, static_cast<size_t>(i)));
        }
      }
      if (allocated[t].size() != 1 || e.output.data != allocated[t][0] ||
          e.output.shape != std::vector<int64_t>{total, cols}) {
        return "tensor " + std::to_string(t) + ": the output is not the allocated " +
               ShapeToString({total, cols});
      }
      const std::string bad = Compare(
          rank.Download(e.output.data, want.size() * 4), dtype, [&](size_t i) { return want[i]; },
          "allgather tensor " + std::to_string(t));
      if (!bad.empty()) return bad;
    }
    return "";
  }));
}

TEST_CASE("Reducescatter leaves each rank its part of the reduction, single or fused",
          "[gpu-sim][gpu-executor]") {
  // 8 rows over 4 ranks split evenly (one tensor runs without a copy); 10 rows do not.
  const int64_t rows = GENERATE(int64_t{8}, int64_t{10});
  const size_t tensors = GENERATE(size_t{1}, size_t{2});
  kolo::testing::Watchdog watchdog("reducescatter", 60s);
  RequireAllPassed(RunRanks(4, [=](ExecRank& rank) -> std::string {
    for (DataType dtype : {DataType::kFloat32, DataType::kInt32}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        const int64_t cols = 5;
        const std::vector<int64_t> split = SplitRows(rows, rank.size());
        int64_t first_row = 0;
        for (int r = 0; r < rank.rank(); ++r) first_row += split[r];
        std::vector<std::unique_ptr<TensorEntry>> owned;
        std::vector<TensorEntry*> entries;
        Response response;
        response.op = OpType::kReducescatter;
        response.dtype = dtype;
        response.reduce_op = op;
        for (size_t t = 0; t < tensors; ++t) {
          void* in = rank.Upload(kolo::testing::MakeInput(dtype, rows * cols, rank.rank(), op));
          void* out =
              rank.Alloc(static_cast<size_t>(split[rank.rank()] * cols) * DataTypeSize(dtype));
          owned.push_back(
              Entry("r" + std::to_string(t), OpType::kReducescatter, dtype, {rows, cols}, in));
          owned.back()->output = {out, dtype, {split[rank.rank()], cols}, Device::Cuda(0)};
          entries.push_back(owned.back().get());
          response.names.push_back(owned.back()->meta.name);
          response.num_elements.push_back(rows * cols);
        }
        const Status s = Run(rank.exec(), response, entries);
        if (!s.ok()) return s.ToString();
        for (const TensorEntry* e : entries) {
          const std::string bad = Compare(
              rank.Download(e->output.data, e->output.num_bytes()), dtype,
              [&](size_t i) {
                return kolo::testing::ExpectedAllreduce(
                    rank.size(), first_row * cols + static_cast<int64_t>(i), op, dtype);
              },
              DataTypeName(dtype) + " " + ReduceOpName(op) + " '" + e->meta.name + "'");
          if (!bad.empty()) return bad;
        }
      }
    }
    return "";
  }));
}

TEST_CASE("Alltoall sends each peer its rows through one grouped send/recv",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("alltoall", 60s);
  RequireAllPassed(RunRanks(3, [](ExecRank& rank) -> std::string {
    const int n = rank.size();
    const int me = rank.rank();
    const DataType dtype = DataType::kInt32;
    const int64_t cols = 2;
    // Rows rank s sends to rank d; rank 0 sends rank 2 nothing.
    const auto rows = [](int s, int d) -> int64_t { return s == 0 && d == 2 ? 0 : s + d + 1; };
    const auto value = [](int s, int d, int64_t i) { return 10000.0 * s + 100.0 * d + i; };
    Response response;
    response.op = OpType::kAlltoall;
    response.dtype = dtype;
    response.names = {"a"};
    for (int s = 0; s < n; ++s) {
      for (int d = 0; d < n; ++d) response.splits.push_back(rows(s, d));
    }
    std::vector<double> input;
    int64_t in_rows = 0;
    for (int d = 0; d < n; ++d) {
      in_rows += rows(me, d);
      for (int64_t i = 0; i < rows(me, d) * cols; ++i) input.push_back(value(me, d, i));
    }
    void* in = rank.Upload(Bytes(dtype, input.size(), [&](size_t i) { return input[i]; }));
    auto e = Entry("a", OpType::kAlltoall, dtype, {in_rows, cols}, in);
    e->output = TensorView{};
    void* out = nullptr;
    e->allocate = [&](const std::vector<int64_t>& shape) {
      out = rank.Alloc(static_cast<size_t>(shape[0] * shape[1]) * 4);
      return out;
    };
    std::vector<int64_t> received;
    e->received_splits = &received;
    const Status s = Run(rank.exec(), response, {e.get()});
    if (!s.ok()) return s.ToString();
    std::vector<double> want;
    std::vector<int64_t> want_splits;
    for (int from = 0; from < n; ++from) {
      want_splits.push_back(rows(from, me));
      for (int64_t i = 0; i < rows(from, me) * cols; ++i) want.push_back(value(from, me, i));
    }
    if (received != want_splits) return "received splits differ";
    if (e->output.data != out) return "the output is not the allocated one";
    return Compare(
        rank.Download(out, want.size() * 4), dtype, [&](size_t i) { return want[i]; }, "alltoall");
  }));
}

TEST_CASE("A joined rank's stand-in contributes device zeros", "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("stand-in", 60s);
  RequireAllPassed(RunRanks(
      2,
      [](ExecRank& rank) -> std::string {
        const int64_t count = 64;
        const DataType dtype = DataType::kFloat32;
        const auto value = [](size_t i) { return 3.0 * i; };
        std::vector<uint8_t> host_zeros(count * 4, 0);
        std::unique_ptr<TensorEntry> e;
        if (rank.rank() == 0) {
          e = Entry("j", OpType::kAllreduce, dtype, {count},
                    rank.Upload(Bytes(dtype, count, value)));
        } else {  // as BackgroundLoop::StandIn makes it
          e = Entry("j", OpType::kAllreduce, dtype, {count}, host_zeros.data());
          e->input.device = e->output.device = Device::Cpu();
        }
        const Response response = MakeResponse(OpType::kAllreduce, dtype, {e.get()});
        const Status s = Run(rank.exec(), response, {e.get()});
        if (!s.ok()) return s.ToString();
        if (rank.rank() == 1) {
          return host_zeros == std::vector<uint8_t>(count * 4, 0) ? "" : "the stand-in changed";
        }
        return Compare(rank.Download(e->output.data, count * 4), dtype, value, "with zeros");
      },
      [](int) {
        RankOptions options;
        options.stand_in_device = 0;
        return options;
      }));
}
