// Test helpers for the pairwise allreduces (recursive doubling, halving-doubling), given the
// algorithm as a function: RunAllreduceCases checks every dtype x op on every rank against a
// direct computation; RunOnRankZero runs the error paths (one rank, after `prepare` has broken
// something).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/ring_allreduce.h"
#include "ops/segmented_buffer.h"
#include "tests/ops/loopback_ring.h"
#include "tests/ops/ring_reference.h"

namespace kolo::testing {

using PairwiseAllreduce = Status (*)(DataPlane&, const ops::SegmentedBuffer&, DataType, ReduceOp,
                                     ops::RingScratch&, const std::string&);

// Runs `algorithm` on every rank for every dtype x op and each of `counts`, each buffer split
// into up to `pieces` pieces of piece_unit, 2 piece_unit, ... elements (the last takes the
// rest) to exercise fused tensors, and compares every element with the direct computation.
// Returns the first failure of each rank ("" when it passed); a failing rank interrupts the
// others so that they stop at once.
inline std::vector<std::string> RunAllreduceCases(PairwiseAllreduce algorithm, Meshes& meshes,
                                                  const std::vector<size_t>& counts, int pieces,
                                                  size_t piece_unit, size_t scratch_bytes) {
  return RunOnRanks(static_cast<int>(meshes.size()), [&](int rank) {
    DataPlane& plane = *meshes[rank];
    const int n = plane.size();
    ops::RingScratch scratch(scratch_bytes);
    for (size_t count : counts) {
      for (int d = 0; d < kNumDataTypes; ++d) {
        const DataType dtype = static_cast<DataType>(d);
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                            ReduceOp::kProduct}) {
          const std::string what = "allreduce '" + std::to_string(count) + " x " +
                                   DataTypeName(dtype) + " " + ReduceOpName(op) + "'";
          ElementBuffer buffer = MakeRankInput(dtype, op, rank, count);
          const size_t element_size = DataTypeSize(dtype);
          uint8_t* data = static_cast<uint8_t*>(buffer.data());
          std::vector<ops::BytePiece> split;
          size_t begin = 0;
          for (size_t p = 1; p < static_cast<size_t>(pieces) && begin + p * piece_unit <= count;
               ++p) {
            split.push_back({data + begin * element_size, p * piece_unit * element_size});
            begin += p * piece_unit;
          }
          split.push_back({data + begin * element_size, (count - begin) * element_size});
          const Status status =
              algorithm(plane, ops::SegmentedBuffer(split), dtype, op, scratch, what);
          std::string failure = status.ok() ? "" : status.ToString();
          for (size_t i = 0; failure.empty() && i < count; ++i) {
            const double expected = ReducedInput(dtype, op, n, i);  // exact
            if (buffer.Get(i) != expected) {
              failure = what + ": element " + std::to_string(i) + " is " +
                        std::to_string(buffer.Get(i)) + ", expected " + std::to_string(expected);
            }
          }
          if (!failure.empty()) {
            InterruptAll(meshes, "rank " + std::to_string(rank) + " failed");
            return "rank " + std::to_string(rank) + ": " + failure;
          }
        }
      }
    }
    return std::string();
  });
}

// For RunOnRankZero: break nothing, the peers stay connected and silent.
inline void BreakNothing(Meshes&) {}

struct FaultRun {
  Status status = Internal("not run");
  double seconds = 0;
};

// `count` float32 elements through `algorithm` on rank 0, with a scratch of `scratch_bytes`.
// Rank 0's mesh polls without sleeping (SetLocalRanks(1)) so that the deadline is also tested
// on the spinning path.
inline FaultRun RunOnRankZero(PairwiseAllreduce algorithm, int n, double timeout_seconds,
                              const std::function<void(Meshes&)>& prepare, size_t count,
                              const std::string& what,
                              size_t scratch_bytes = ops::RingScratch::kDefaultBytes) {
  FaultRun run;
  StatusOr<Meshes> meshes = ConnectLoopbackMeshes(n, timeout_seconds);
  if (!meshes.ok()) {
    run.status = meshes.status().WithContext("test setup");
    return run;
  }
  (*meshes)[0]->SetLocalRanks(1);
  prepare(*meshes);
  std::vector<float> data(count, 1.0f);
  ops::RingScratch scratch(scratch_bytes);
  const auto start = std::chrono::steady_clock::now();
  run.status = algorithm(*(*meshes)[0], ops::SegmentedBuffer(data.data(), count * sizeof(float)),
                         DataType::kFloat32, ReduceOp::kSum, scratch, what);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace kolo::testing
