// Placement: where a rank stands among the job's ranks, from the peer table every rank holds
// the same (RuntimeStart::MeetPeers): its host groups (runtime/host_groups.h), its local and
// cross rank and size (Topology, what kolo.h's local_rank() and friends return), and the ranks
// that share its cores (runtime/core_share.h). Plain values, constant once the start made them.
#pragma once

#include "runtime/core_share.h"
#include "runtime/host_groups.h"

namespace kolo {

struct Topology {
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

// `rank`'s local and cross rank and sizes in `groups` (ComputeHostGroups: ranks sharing a host
// name form a local set, ordered by rank; hosts are numbered by their lowest rank).
Topology ComputeTopology(const HostGroups& groups, int rank);

struct Placement {
  HostGroups host_groups;
  // From the host groups, unless KOLO_LOCAL_RANK / KOLO_LOCAL_SIZE (a launcher's) say otherwise.
  Topology topology;
  CoreShare core_share;  // the ranks on this rank's CPUs (at least its host's local ranks)
  int own_cpus = 1;      // the CPUs this process may run on
};

}  // namespace kolo
