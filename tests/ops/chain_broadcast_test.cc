// The chain a broadcast runs along: every rank but the root receives exactly once, from its
// predecessor, and the chain visits every rank. (Data movement is tested end to end in
// tests/runtime/broadcast_test.cc.)
#include "ops/chain_broadcast.h"

#include <catch2/catch.hpp>
#include <set>

using kolo::ops::BroadcastChain;
using kolo::ops::ChainLinks;

TEST_CASE("The broadcast chain starts at the root and visits every rank once", "[ops][broadcast]") {
  const int n = GENERATE(range(1, 9));
  for (int root = 0; root < n; ++root) {
    INFO("n = " << n << ", root = " << root);
    CHECK(BroadcastChain(root, n, root).recv_from == -1);
    std::set<int> reached = {root};
    int rank = root;
    for (int hop = 1; hop < n; ++hop) {
      const int next = BroadcastChain(rank, n, root).send_to;
      REQUIRE(next >= 0);
      CHECK(BroadcastChain(next, n, root).recv_from == rank);
      reached.insert(next);
      rank = next;
    }
    CHECK(BroadcastChain(rank, n, root).send_to == -1);  // the last rank forwards nothing
    CHECK(static_cast<int>(reached.size()) == n);
  }
}
