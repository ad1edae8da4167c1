// CoreShare: how many of a job's ranks may run on this rank's CPUs, and on how many CPUs
// together, from the peer table. Host names say which ranks share memory; they do not say
// which share cores: containers of one machine (pods of one node, the testbed's network
// namespaces) report different host names while their ranks compete for the same CPUs, and on
// one host ranks bound to CPUs of their own (KOLO_CPU_BIND=core) do not compete at all. So each
// rank reports its machine: the kernel's boot id, which every namespace and container on that
// kernel reads the same, and the CPUs its affinity allows. Ranks of one kernel whose CPUs
// overlap share them. Whether a rank busy-polls, and how long a caller spins for its op
// (runtime_start.cc), follow from the share.
//
// Pure functions but LocalMachine, which reads /proc and the calling thread's affinity.
#pragma once

#include <string>
#include <vector>

#include "core/messages.h"

namespace kolo {

// This process's machine for its Hello: "<boot id>/<cpus>", the cpus as a list ("0-3,8").
// "" when the boot id or the affinity cannot be read.
std::string LocalMachine();

struct CoreShare {
  int ranks = 1;  // the ranks (this one included) that may run on this rank's CPUs
  int cores = 1;  // the CPUs those ranks may run on, together
};

// The ranks among `peers` (indexed by rank) on the kernel of `rank`'s machine whose CPUs
// overlap its own, and the union of their CPUs. Where `rank`'s machine or a peer's is empty or
// unreadable (a rank that could not read it), a peer shares when it reports `rank`'s host name,
// and brings no CPUs of its own to the union: host-name counting, as without machines.
// `own_cpus` is this rank's CPU count for that fallback (its affinity).
CoreShare ComputeCoreShare(const std::vector<PeerInfo>& peers, int rank, int own_cpus);

// "0-3,8" <-> the set of CPUs (index = CPU number). Parse: false on anything else (an empty
// text is an empty set).
bool ParseCpuList(const std::string& text, std::vector<bool>* cpus);
std::string FormatCpuList(const std::vector<bool>& cpus);

}  // namespace kolo
