// HostGroups: the rank groups of the hierarchical collectives (ops/hierarchical_allreduce.h,
// ops/hierarchical_gather.h), from the peer table, which every rank holds the same: ranks that
// report one host name share a host, in any placement (a host's ranks need not be
// consecutive); a rank's place on its host counts the host's ranks below it (ComputeTopology's
// local rank, which is derived from these groups). A process set's groups are the same over its
// members alone (SetHostGroups). Pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/messages.h"

namespace kolo {

struct HostGroups {
  std::vector<int> local;           // this host's ranks, ascending
  std::vector<int> cross;           // the ranks with this rank's place on their host, ascending
  std::vector<int> ranks_per_host;  // hosts numbered by their lowest rank
  std::vector<int> place;           // every rank's place on its host, by rank
  std::vector<int> host_of;         // every rank's host, by that numbering
  int host = 0;                     // this rank's host, by that numbering

  // Whether every host has the same number of ranks (the hierarchical allreduce needs it).
  bool uniform() const;
  // Whether the ranks can run the hierarchical collectives: several hosts, more than one rank
  // on each, the same number on every host.
  bool hierarchical() const;
  // "2 hosts of 2 ranks" (uniform), "2 hosts of 3 and 1 ranks" (not).
  std::string Describe() const;
};

// The groups of `rank` in `peers` (indexed by rank, as Controller's peer table).
HostGroups ComputeHostGroups(const std::vector<PeerInfo>& peers, int rank);

// The groups of a process set in its own terms: its ranks are the indices into `members` (job
// ranks, ascending, as ProcessSets keeps them), `index` is this rank's, and hosts are numbered
// by their lowest member. `job` is any rank's ComputeHostGroups (host_of is the same on every
// rank). A set that leaves some host out, or takes only part of one, has the groups of a job
// placed so.
HostGroups SetHostGroups(const HostGroups& job, const std::vector<int>& members, int index);

}  // namespace kolo
