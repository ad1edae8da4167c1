// Send and receive on a non-blocking socket that report would-block, EOF and errno without
// throwing or raising SIGPIPE: what the TCP data mesh (transport/tcp/) and the shared-memory
// round lane's doorbells (transport/shm/shm_round_lane.h) share. Stateless; thread-safe.
#pragma once

#include <cstddef>

namespace kolo::transport {

// Result of one send or recv: `bytes` moved, or EOF, or an errno; all zero means would-block.
struct IoResult {
  size_t bytes = 0;
  bool eof = false;
  int error = 0;
  bool would_block() const { return bytes == 0 && !eof && error == 0; }
};

// One send()/recv() on `fd` (non-blocking), retried on EINTR.
IoResult SendSome(int fd, const void* data, size_t size);
IoResult RecvSome(int fd, void* data, size_t size);

}  // namespace kolo::transport
