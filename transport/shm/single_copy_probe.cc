#include "transport/shm/single_copy_probe.h"

#include <unistd.h>

#include <atomic>
#include <memory>
#include <random>

#include "transport/peer_memory.h"

namespace kolo::transport {
namespace {

// This rank's verdict on every peer, before the inbox check.
void TryPeers(int rank, int size, uint64_t token, const std::function<ProbeWords*(int)>& words,
              ProbeWords& mine) {
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const ProbeWords& theirs = *words(peer);
    const pid_t pid = static_cast<pid_t>(__atomic_load_n(&theirs.pid, __ATOMIC_ACQUIRE));
    uint64_t seen = 0;
    int err = ReadProcessMemory(pid, {{theirs.token_address, sizeof(seen)}}, &seen);
    if (err == 0 && seen != theirs.token) {
      mine.refusal = kProbeStranger;
    } else if (err == 0) {
      // Only now that the id is known to name the peer: write into it.
      err = WriteProcessMemory(pid, &token, {{theirs.inbox_address + 8 * rank, sizeof(token)}});
      if (err != 0) mine.refusal = kProbeWrite;
    } else {
      mine.refusal = kProbeRead;
    }
    if (mine.refusal != kProbeNone) {
      mine.error = err;
      mine.peer = peer;
      return;
    }
  }
}

// Inboxes of failed probes (ProbeSingleCopy), which peers may still write into: never freed,
// and reachable from here (so that leak checkers do not report them).
struct KeptInbox {
  std::unique_ptr<uint64_t[]> words;
  KeptInbox* next;
};
std::atomic<KeptInbox*> kept_inboxes{nullptr};

void KeepForever(std::unique_ptr<uint64_t[]> inbox) {
  auto* kept = new KeptInbox{std::move(inbox), kept_inboxes.load()};
  while (!kept_inboxes.compare_exchange_weak(kept->next, kept)) {
  }
}

std::string RefusalText(int rank, const ProbeWords& words) {
  const std::string who = "rank " + std::to_string(rank);
  const std::string peer = "rank " + std::to_string(words.peer);
  switch (words.refusal) {
    case kProbeOff:
      return who + " has KOLO_SHM_SINGLE_COPY=off";
    case kProbeNotChosen:
      return who +
             " leaves it off: KOLO_SHM_SINGLE_COPY=auto leaves it off for two ranks sharing "
             "a core";
    case kProbeRead:
      return who + " could not read " + peer + "'s memory: " + ProcessMemoryErrorText(words.error);
    case kProbeWrite:
      return who + " could not write into " + peer +
             "'s memory: " + ProcessMemoryErrorText(words.error);
    case kProbeStranger:
      return who + " reads another process under " + peer +
             "'s process id (are the ranks in different PID namespaces?)";
    case kProbeLost:
      return who + " did not receive what " + peer + " wrote into its memory";
    default:
      return who + " voted no";
  }
}

}  // namespace

StatusOr<ProbeOutcome> ProbeSingleCopy(int rank, int size, ProbeRefusal skip,
                                       const std::function<ProbeWords*(int)>& words,
                                       const std::function<Status()>& sync) {
  // Read by peers through process_vm_readv and written by them through process_vm_writev
  // between the syncs below, so they live until the last one. A sync that fails here may be
  // one that the peers pass a moment later (the last rank arrived just after this one's
  // deadline), and they then write into the inbox: on failure it is kept (size x 8 bytes, for
  // the process's life) rather than freed under their writes. The token is only read.
  std::random_device device;
  uint64_t token = (uint64_t{device()} << 32) | device();
  auto inbox_owner = std::make_unique<uint64_t[]>(size);  // zeroed
  uint64_t* const inbox = inbox_owner.get();
  const auto synced = [&sync, &inbox_owner]() -> Status {
    Status status = sync();
    if (!status.ok()) KeepForever(std::move(inbox_owner));  // see above: peers may write it
    return status;
  };
  ProbeWords& mine = *words(rank);
  mine = ProbeWords{};
  mine.pid = getpid();
  mine.token = token;
  mine.token_address = reinterpret_cast<uint64_t>(&token);
  mine.inbox_address = reinterpret_cast<uint64_t>(inbox);
  KOLO_RETURN_IF_ERROR(synced());
  if (skip == kProbeNone) {
    TryPeers(rank, size, token, words, mine);
  } else {
    mine.refusal = skip;
  }
  KOLO_RETURN_IF_ERROR(synced());  // every write has landed
  for (int peer = 0; peer < size && mine.refusal == kProbeNone; ++peer) {
    // A peer that stopped at an earlier rank never wrote here; its own refusal says why.
    if (peer == rank || words(peer)->refusal != kProbeNone) continue;
    if (inbox[peer] != words(peer)->token) {
      mine.refusal = kProbeLost;
      mine.peer = peer;
    }
  }
  mine.vote = mine.refusal == kProbeNone ? 1 : 0;
  KOLO_RETURN_IF_ERROR(synced());  // every vote is in
  ProbeOutcome outcome;
  outcome.single_copy = true;
  for (int r = 0; r < size; ++r) {
    const ProbeWords& theirs = *words(r);
    outcome.pids.push_back(static_cast<pid_t>(theirs.pid));
    if (theirs.vote == 1) continue;
    if (outcome.single_copy) {
      outcome.refusal = RefusalText(r, theirs);
      outcome.refusal_kind = static_cast<ProbeRefusal>(theirs.refusal);
    }
    outcome.single_copy = false;
  }
  return outcome;
}

}  // namespace kolo::transport
