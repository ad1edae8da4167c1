// Loopback meshes for the multi-rank tests of transport/ and ops/: n TcpMeshes
// (transport/tcp/tcp_mesh.h) in one process on 127.0.0.1, listened and then connected each from its
// own thread (tests/support/rank_threads.h), and InterruptAll for a rank body that gives up.
// Call from the test's thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/logging.h"
#include "kolo/status.h"
#include "tests/support/rank_threads.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo::testing {

using Meshes = std::vector<std::unique_ptr<transport::TcpMesh>>;

// How long connecting a loopback mesh may take: far beyond what it needs (milliseconds), so
// that a machine busy with other builds and tests never fails a setup.
constexpr std::chrono::seconds kMeshConnectLimit(30);

// Rank `rank` of `size` on loopback, with the test job's credentials; logs warnings only.
inline transport::TcpMesh::Config MeshConfig(int rank, int size, double timeout_seconds = 10) {
  transport::TcpMesh::Config config;
  config.rank = rank;
  config.size = size;
  config.auth.credentials = {"test-key", "test-job"};
  config.timeout_seconds = timeout_seconds;
  config.logger = MakeLogger(rank, "transport", spdlog::level::warn);
  return config;
}

// Listens on n meshes (`lazy`: TcpMesh::Config::lazy, the default as in a job; false: the full
// mesh); returns them with their addresses (empty on failure).
inline Meshes ListenAll(int n, double timeout_seconds, std::vector<std::string>* addresses,
                        bool lazy = true) {
  Meshes meshes;
  for (int r = 0; r < n; ++r) {
    transport::TcpMesh::Config config = MeshConfig(r, n, timeout_seconds);
    config.lazy = lazy;
    StatusOr<std::unique_ptr<transport::TcpMesh>> mesh = transport::TcpMesh::Listen(config);
    if (!mesh.ok()) return {};
    addresses->push_back((*mesh)->listen_address());
    meshes.push_back(std::move(mesh).value());
  }
  return meshes;
}

// Connects all meshes concurrently; returns each rank's Connect status.
inline std::vector<Status> ConnectAll(const Meshes& meshes,
                                      const std::vector<std::string>& addresses,
                                      std::chrono::seconds limit = kMeshConnectLimit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  return RunOnRanks(static_cast<int>(meshes.size()),
                    [&](int r) { return meshes[r]->Connect(addresses, deadline); });
}

// ListenAll and ConnectAll in one: n connected meshes, or why not.
inline StatusOr<Meshes> ConnectLoopbackMeshes(int n, double timeout_seconds = 10,
                                              bool lazy = true) {
  std::vector<std::string> addresses;
  Meshes meshes = ListenAll(n, timeout_seconds, &addresses, lazy);
  if (static_cast<int>(meshes.size()) != n) return Internal("could not listen on loopback");
  const std::vector<Status> connected = ConnectAll(meshes, addresses);
  for (int rank = 0; rank < n; ++rank) {
    if (!connected[rank].ok()) {
      return Internal("rank " + std::to_string(rank) +
                      " could not connect: " + connected[rank].ToString());
    }
  }
  return meshes;
}

// Makes every mesh's running and later exchanges fail, so that when one rank's body gives up
// the others stop at once instead of waiting for the data-plane deadline.
inline void InterruptAll(Meshes& meshes, const std::string& why) {
  for (auto& mesh : meshes) mesh->Interrupt(Aborted(why));
}

}  // namespace kolo::testing
