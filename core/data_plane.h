// DataPlane: the byte-moving interface that collective algorithms (ops/) run on. transport/
// implements it over TCP (transport/tcp/tcp_mesh.h). An algorithm describes one step as a
// StreamExchange: a byte stream to one peer and a byte stream from another, whose contents
// the algorithm produces and consumes progressively, so that sending, receiving and reducing
// overlap (DESIGN.md §3).
//
// Threading: Exchange is called by the background thread only, one at a time. Interrupt may be
// called from any thread; it makes a running and every later Exchange fail with its status.
#pragma once

#include <cstddef>
#include <string>

#include "kolo/status.h"

namespace kolo {

struct ConstBytes {
  const void* data = nullptr;
  size_t size = 0;
};
struct MutableBytes {
  void* data = nullptr;
  size_t size = 0;
};

// The algorithm's side of one exchange. Called only from inside DataPlane::Exchange.
class StreamExchange {
 public:
  virtual ~StreamExchange() = default;
  // Total bytes this exchange sends to / receives from its peers (known up front).
  virtual size_t send_total() const = 0;
  virtual size_t recv_total() const = 0;
  // The next contiguous bytes that are ready to be sent, starting at the first byte not yet
  // reported by OnSent. Empty when nothing is ready yet (it becomes ready as bytes are
  // received and processed).
  virtual ConstBytes NextSend() = 0;
  virtual void OnSent(size_t n) = 0;
  // Where the next received bytes go; non-empty while receiving is not complete.
  virtual MutableBytes NextRecv() = 0;
  // `n` bytes were written at the start of the last NextRecv() region. The algorithm may
  // reduce or copy them now.
  virtual void OnReceived(size_t n) = 0;
};

class DataPlane {
 public:
  virtual ~DataPlane() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Runs `exchange` to completion: sends its send stream to rank `send_to` and receives its
  // receive stream from rank `recv_from` (either may equal the other; either may be -1 when
  // that direction carries nothing). Blocks until both streams are complete. Fails if a peer
  // closes its connection, if no byte moves for the configured timeout, or on Interrupt.
  // `what` ("allreduce 'grad/w1' (3 tensors, 12 MiB)") prefixes every error message.
  virtual Status Exchange(int send_to, int recv_from, StreamExchange& exchange,
                          const std::string& what) = 0;
  // Fails the running and all later Exchange calls with `why`. Any thread.
  virtual void Interrupt(const Status& why) = 0;
};

}  // namespace kolo
