// Test helper for the error paths of the pairwise allreduces (recursive doubling,
// halving-doubling): runs one algorithm on rank 0 of `n` loopback meshes after `prepare` has
// broken something (closed a peer, interrupted rank 0, or nothing: the peers stay silent), and
// returns the status with the time it took. The other ranks never call the algorithm.
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

namespace kolo::testing {

using PairwiseAllreduce = Status (*)(DataPlane&, const ops::SegmentedBuffer&, DataType, ReduceOp,
                                     ops::RingScratch&, const std::string&);

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
