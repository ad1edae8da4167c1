// StreamPump: runs one StreamExchange (core/data_plane.h) over connected, non-blocking data
// sockets with a single poll() loop: sends while the exchange has bytes ready, receives while
// its receive stream is incomplete, and wakes on the mesh's interrupt eventfd. With busy_poll,
// after bytes last moved it polls without sleeping (yielding the core between polls) for up to 1
// ms, or 100 us before the first byte from the peer, and only then blocks in poll(): a wake-up
// through the scheduler costs more than a small message's transfer. Called by TcpMesh::Exchange on
// the background thread; single-threaded.
#pragma once

#include <functional>
#include <string>

#include "core/data_plane.h"
#include "kolo/status.h"

namespace kolo::transport {

struct PumpEnds {
  int send_fd = -1;    // -1: nothing to send
  int send_peer = -1;  // rank behind send_fd, for messages
  int recv_fd = -1;    // -1: nothing to receive
  int recv_peer = -1;
  int interrupt_fd = -1;                     // readable once the mesh is interrupted
  std::function<Status()> interrupt_status;  // what to return then
  double timeout_seconds = 0;  // the mesh's KOLO_TIMEOUT_SECONDS: longest time with no progress
  bool busy_poll = true;       // false: block in poll() at once (no spinning)
};

// Blocks until both streams of `exchange` are complete. Errors name the peer and start with
// `what`: a closed connection is Unavailable, no progress for timeout_seconds is
// DeadlineExceeded; an interrupt returns interrupt_status() unchanged.
Status PumpExchange(const PumpEnds& ends, StreamExchange& exchange, const std::string& what);

}  // namespace kolo::transport
