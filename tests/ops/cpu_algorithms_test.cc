// ops/cpu_algorithms.h: which algorithm each op's list picks for each route, in the order the
// CPU executor has always tried them, and that every list ends with one that always applies.
// The algorithms themselves run on real data in cpu_executor_test.cc and the runtime's tests.
#include "ops/cpu_algorithms.h"

#include <catch2/catch.hpp>
#include <string>

namespace kolo::ops {
namespace {

const Route kFlat{false, false};
const Route kShm{true, false};
const Route kHierarchical{false, true};
const Route kBoth{true, true};  // never made by the runtime; the lists still say who wins

template <typename Args, size_t N>
std::string Picks(const Algorithm<Args> (&list)[N], const Route& route) {
  return Choose(list, route).phase;
}

template <typename Args, size_t N>
void CheckLastAlwaysApplies(const Algorithm<Args> (&list)[N]) {
  for (const Route& route : {kFlat, kShm, kHierarchical, kBoth}) {
    CHECK(list[N - 1].applies(route));
  }
}

TEST_CASE("Each op's list picks shared memory on one host, the two steps on several, else flat",
          "[ops]") {
  CHECK(Picks(kBroadcastAlgorithms, kFlat) == "CHAIN_BROADCAST");
  CHECK(Picks(kBroadcastAlgorithms, kShm) == "SHM_BROADCAST");
  CHECK(Picks(kBroadcastAlgorithms, kHierarchical) == "HIERARCHICAL_BROADCAST");
  CHECK(Picks(kBroadcastAlgorithms, kBoth) == "SHM_BROADCAST");

  CHECK(Picks(kAllgatherAlgorithms, kFlat) == "RING_ALLGATHER");
  CHECK(Picks(kAllgatherAlgorithms, kShm) == "SHM_ALLGATHER");
  CHECK(Picks(kAllgatherAlgorithms, kHierarchical) == "HIERARCHICAL_ALLGATHER");
  CHECK(Picks(kAllgatherAlgorithms, kBoth) == "SHM_ALLGATHER");

  CHECK(Picks(kReducescatterAlgorithms, kFlat) == "RING_REDUCESCATTER");
  CHECK(Picks(kReducescatterAlgorithms, kShm) == "SHM_REDUCESCATTER");
  CHECK(Picks(kReducescatterAlgorithms, kHierarchical) == "HIERARCHICAL_REDUCESCATTER");
  CHECK(Picks(kReducescatterAlgorithms, kBoth) == "HIERARCHICAL_REDUCESCATTER");

  // Shared memory's allreduce is a pipeline of its own (CpuExecutor::AllreduceShm).
  CHECK(Picks(kAllreduceAlgorithms, kFlat) == "RING_ALLREDUCE");
  CHECK(Picks(kAllreduceAlgorithms, kShm) == "RING_ALLREDUCE");
  CHECK(Picks(kAllreduceAlgorithms, kHierarchical) == "HIERARCHICAL_ALLREDUCE");

  // No hierarchical alltoall: across hosts it runs pairwise.
  CHECK(Picks(kAlltoallAlgorithms, kFlat) == "PAIRWISE_ALLTOALL");
  CHECK(Picks(kAlltoallAlgorithms, kShm) == "SHM_ALLTOALL");
  CHECK(Picks(kAlltoallAlgorithms, kHierarchical) == "PAIRWISE_ALLTOALL");
}

TEST_CASE("Every list ends with an algorithm that always applies", "[ops]") {
  CheckLastAlwaysApplies(kAllreduceAlgorithms);
  CheckLastAlwaysApplies(kBroadcastAlgorithms);
  CheckLastAlwaysApplies(kAllgatherAlgorithms);
  CheckLastAlwaysApplies(kReducescatterAlgorithms);
  CheckLastAlwaysApplies(kAlltoallAlgorithms);
}

}  // namespace
}  // namespace kolo::ops
