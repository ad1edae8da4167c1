// Host names for the ranks of a LocalJob posing as several hosts (Options::host, as
// KOLO_HOSTNAME sets it), by placement name, for the tests of the hierarchical collectives.
// Pure functions; thread-safe.
#pragma once

#include <functional>
#include <string>

#include "kolo/options.h"

namespace kolo::testing {

// Rank r's host: "ab" puts ranks 0, 1 on host a and 2, 3 on host b; "interleaved" the even ranks
// on a and the odd on b; "abc" ranks 0, 3 on a, 1, 4 on b, 2, 5 on c (three hosts,
// interleaved); "3+1" ranks 0, 1, 2 on a and 3 on b (uneven hosts); "abba" ranks 0, 3 on a and
// 1, 2 on b (place 1's ranks, 2 and 3, lie on the hosts in the other order than place 0's).
inline std::string HostOf(const std::string& placement, int rank) {
  if (placement == "interleaved") return rank % 2 == 0 ? "host-a" : "host-b";
  if (placement == "abba") return rank == 0 || rank == 3 ? "host-a" : "host-b";
  if (placement == "abc") return std::string("host-") + static_cast<char>('a' + rank % 3);
  if (placement == "3+1") return rank < 3 ? "host-a" : "host-b";
  return rank < 2 ? "host-a" : "host-b";
}

// The ranks a placement has: 6 for "abc", else 4.
inline int RanksOf(const std::string& placement) {
  return placement == "abc" ? 6 : 4;
}

// An Options tweak for LocalJob: the rank's host by `placement`, KOLO_HIERARCHICAL, the
// transport and the timeline path ("": none).
inline std::function<void(Options&)> OnHosts(const std::string& placement, Hierarchical mode,
                                             Transport transport = Transport::kAuto,
                                             const std::string& timeline = "") {
  return [placement, mode, transport, timeline](Options& options) {
    options.host = HostOf(placement, options.rank);
    options.hierarchical = mode;
    options.transport = transport;
    options.timeline_path = timeline;
  };
}

}  // namespace kolo::testing
