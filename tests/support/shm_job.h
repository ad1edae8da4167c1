// ShmJob: n thread-ranks' shared-memory planes (transport/shm/shm_mesh.h) over loopback meshes,
// for the tests of the shared-memory collectives. MakeShmJob blocks until every rank mapped the
// segment (REQUIREs that it did); call it from the test's thread.
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/loopback_mesh.h"
#include "tests/support/rank_threads.h"
#include "transport/shm/shm_mesh.h"

namespace kolo::testing {

struct ShmJob {
  Meshes meshes;
  std::vector<std::unique_ptr<transport::ShmMesh>> planes;
};

// Rank r's plane has slots of `slot_bytes`, a 10 s timeout and `single_copy`; `tweak` (may be
// empty) changes a rank's configuration, on the thread that creates its plane.
inline ShmJob MakeShmJob(int n, size_t slot_bytes, transport::ShmMesh::SingleCopy single_copy,
                         const std::function<void(int, transport::ShmMesh::Config&)>& tweak = {}) {
  ShmJob job;
  StatusOr<Meshes> meshes = ConnectLoopbackMeshes(n);
  REQUIRE(meshes.status().ToString() == "OK");
  job.meshes = std::move(meshes).value();
  job.planes.resize(n);
  const std::vector<std::string> created = RunOnRanks(n, [&](int r) {
    transport::ShmMesh::Config config;
    config.rank = r;
    config.size = n;
    config.slot_bytes = slot_bytes;
    config.timeout_seconds = 10;
    config.single_copy = single_copy;
    if (tweak) tweak(r, config);
    StatusOr<std::unique_ptr<transport::ShmMesh>> plane =
        transport::ShmMesh::Create(config, *job.meshes[r]);
    if (!plane.ok()) return plane.status().ToString();
    job.planes[r] = std::move(plane).value();
    return std::string();
  });
  for (const std::string& failure : created) REQUIRE(failure == "");
  return job;
}

}  // namespace kolo::testing
