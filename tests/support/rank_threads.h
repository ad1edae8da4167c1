// RunOnRanks: runs one body per rank on its own thread, for the multi-rank tests that keep N
// ranks (meshes, channels, runtimes) in one process. Catch2 assertions are not thread-safe, so
// a body reports by returning (a failure text, "" when it passed; a Status; anything) and the
// test thread asserts on the results. Blocks until every body has returned; call it from the
// test's thread, under the test's Watchdog.
#pragma once

#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace kolo::testing {

// Runs body(rank) for rank 0..n-1 on n threads and returns what each returned, by rank (or
// nothing, for a body that returns void).
template <typename Body>
auto RunOnRanks(int n, Body&& body) {
  using Result = std::invoke_result_t<Body&, int>;
  if constexpr (std::is_void_v<Result>) {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < n; ++rank) threads.emplace_back([&body, rank] { body(rank); });
    for (std::thread& thread : threads) thread.join();
  } else {
    std::vector<Result> results(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int rank = 0; rank < n; ++rank) {
      threads.emplace_back([&results, &body, rank] { results[rank] = body(rank); });
    }
    for (std::thread& thread : threads) thread.join();
    return results;
  }
}

// The non-empty entries of `results` as "rank N: <text>", for CHECK(Failures(r).empty()).
inline std::vector<std::string> Failures(const std::vector<std::string>& results) {
  std::vector<std::string> failures;
  for (size_t rank = 0; rank < results.size(); ++rank) {
    if (!results[rank].empty())
      failures.push_back("rank " + std::to_string(rank) + ": " + results[rank]);
  }
  return failures;
}

}  // namespace kolo::testing
