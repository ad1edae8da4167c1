// Test helper for the multi-rank ops tests: n TcpMeshes (transport/tcp/tcp_mesh.h) connected over
// loopback in one process, and RunOnRanks, which runs one body per rank on its own thread.
// Catch2 assertions are not thread-safe, so rank bodies return a failure text (empty: passed)
// and the test thread asserts on those.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kolo/status.h"
#include "transport/tcp/tcp_mesh.h"

namespace kolo::testing {

using Meshes = std::vector<std::unique_ptr<transport::TcpMesh>>;

// Runs body(rank) for rank 0..n-1 on n threads and returns what each body returned.
inline std::vector<std::string> RunOnRanks(int n, const std::function<std::string(int)>& body) {
  std::vector<std::string> results(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&results, &body, rank] { results[rank] = body(rank); });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

// Makes every mesh's running and later exchanges fail, so that when one rank's body gives up
// the others stop at once instead of waiting for the data-plane deadline.
inline void InterruptAll(Meshes& meshes, const std::string& why) {
  for (auto& mesh : meshes) mesh->Interrupt(Aborted(why));
}

// Listens on 127.0.0.1 for every rank, then connects all of them (each from its own thread).
inline StatusOr<Meshes> ConnectLoopbackMeshes(int n, double timeout_seconds = 10) {
  Meshes meshes;
  std::vector<std::string> addresses;
  for (int rank = 0; rank < n; ++rank) {
    transport::TcpMesh::Config config;
    config.rank = rank;
    config.size = n;
    config.auth.credentials = {"ops-test-key", "ops-test-job"};
    config.timeout_seconds = timeout_seconds;
    StatusOr<std::unique_ptr<transport::TcpMesh>> mesh = transport::TcpMesh::Listen(config);
    if (!mesh.ok()) return mesh.status();
    addresses.push_back((*mesh)->listen_address());
    meshes.push_back(std::move(mesh).value());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const std::vector<std::string> failures = RunOnRanks(n, [&](int rank) {
    const Status status = meshes[rank]->Connect(addresses, deadline);
    return status.ok() ? std::string() : status.ToString();
  });
  for (int rank = 0; rank < n; ++rank) {
    if (!failures[rank].empty()) {
      return Internal("rank " + std::to_string(rank) + " could not connect: " + failures[rank]);
    }
  }
  return meshes;
}

}  // namespace kolo::testing
