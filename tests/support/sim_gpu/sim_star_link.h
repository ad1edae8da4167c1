// StarLink: the sockets of one simulated communicator (SimCollectives), as NCCL's bootstrap
// makes them from a unique id. A simulated id names an abstract Unix socket (random, so ids
// never collide and nothing is left on disk); rank 0 listens on it, every other rank connects
// to rank 0, so the ranks may be threads of one process or separate processes. Messages are
// length-prefixed byte strings between rank 0 and each other rank (a star).
//
// Threading: Join, Send and Recv are called by one thread at a time (the comm's bootstrap
// thread, then the stream running its ops); Abort may be called from any thread at any time
// and wakes every one of them. Every wait has a deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kolo/status.h"
#include "ops/gpu/collective_api.h"
#include "transport/unique_fd.h"

namespace kolo::gpu::sim {

using Clock = std::chrono::steady_clock;

// A fresh simulated id: a magic prefix and a random abstract socket name. Opens nothing.
UniqueId NewSimId();
// The socket name `id` stands for; empty if `id` is not a simulated id.
std::string SimIdName(const UniqueId& id);

class StarLink {
 public:
  StarLink(std::string name, int size, int rank);
  ~StarLink();
  StarLink(const StarLink&) = delete;
  StarLink& operator=(const StarLink&) = delete;

  // Blocks until every rank joined, the deadline passes, or Abort. Rank 0 listens and accepts
  // the others (checking each one's rank and size); the others connect, retrying while rank 0
  // is not listening yet. Errors say which ranks are missing or what went wrong:
  // InvalidArgument for a rank or size that does not fit, DeadlineExceeded, Aborted,
  // Unavailable when a rank closed its connection, Internal for a socket error (the id's
  // address in use, say).
  Status Join(Clock::time_point deadline);

  // One message to / from `peer` (rank 0 talks to every rank; the others only to rank 0).
  // Unavailable naming the rank when its connection closed; DeadlineExceeded; Aborted.
  Status Send(int peer, const std::vector<uint8_t>& bytes, Clock::time_point deadline);
  StatusOr<std::vector<uint8_t>> Recv(int peer, Clock::time_point deadline);

  // Fails every wait, now and later, and shuts the connections down so that the peers see
  // this rank leave. Idempotent; any thread.
  void Abort();
  bool aborted() const { return aborted_.load(); }

 private:
  // Waits until `fd` is ready for `events` (POLLIN/POLLOUT), Abort or the deadline.
  Status Wait(int fd, short events, Clock::time_point deadline, const std::string& what) const;
  Status WriteAll(int fd, const void* data, size_t bytes, Clock::time_point deadline,
                  int peer) const;
  Status ReadAll(int fd, void* data, size_t bytes, Clock::time_point deadline, int peer) const;
  Status Listen(Clock::time_point deadline);
  Status Connect(Clock::time_point deadline);
  int PeerFd(int peer) const;
  // Takes `fd` as the connection to `peer` (shut down at once if aborted meanwhile).
  void Adopt(int peer, int fd);

  const std::string name_;
  const int size_;
  const int rank_;
  transport::UniqueFd abort_fd_;  // eventfd, readable once aborted; constant after construction
  std::atomic<bool> aborted_{false};

  mutable std::mutex mu_;
  // guarded by mu_ (the fds are constant once set; Abort shuts them down, the destructor
  // closes them): rank 0 holds one per rank (its own unused), the others peers_[0].
  std::vector<transport::UniqueFd> peers_;
  transport::UniqueFd listener_;  // guarded by mu_
};

}  // namespace kolo::gpu::sim
