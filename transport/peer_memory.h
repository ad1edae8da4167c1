// PeerMemory: copies between this process's memory and another process's on the same host
// through Linux's cross-memory attach (process_vm_readv, process_vm_writev): one copy, made by
// the kernel, where staging through shared memory takes two. ShmMesh's single copy
// (transport/shm/shm_mesh.h) and point-to-point's larger tensors on one host
// (transport/p2p/p2p_lane.h) are built on it. The kernel allows it when this process may ptrace
// the other (same user, and no Yama ptrace_scope, seccomp filter or container rule against it),
// which ShmMesh probes at creation and the lane finds out at its first read.
//
// Pure functions over caller-owned memory; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/shared_memory_plane.h"

namespace kolo::transport {

// Copies `ranges` of process `pid`'s memory into `local` (their total bytes), in as few system
// calls as the kernel's iovec limit allows. 0 on success, else the errno of the call that
// failed (ESRCH: the process is gone; EFAULT: an address is not mapped; EPERM: not allowed).
int ReadProcessMemory(pid_t pid, const std::vector<PeerRange>& ranges, void* local);

// Copies `local` (the ranges' total bytes) into `ranges` of process `pid`'s memory. As above.
int WriteProcessMemory(pid_t pid, const void* local, const std::vector<PeerRange>& ranges);

// What an errno of those calls means, for messages: "its process is gone (No such process
// (ESRCH))".
std::string ProcessMemoryErrorText(int err);

}  // namespace kolo::transport
