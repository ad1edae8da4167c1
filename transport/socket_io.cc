#include "transport/socket_io.h"

#include <sys/socket.h>

#include <cerrno>

namespace kolo::transport {

IoResult SendSome(int fd, const void* data, size_t size) {
  IoResult result;
  ssize_t n;
  do {
    n = send(fd, data, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n >= 0) {
    result.bytes = static_cast<size_t>(n);
  } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
    result.error = errno;
  }
  return result;
}

IoResult RecvSome(int fd, void* data, size_t size) {
  IoResult result;
  ssize_t n;
  do {
    n = recv(fd, data, size, 0);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    result.bytes = static_cast<size_t>(n);
  } else if (n == 0) {
    result.eof = size > 0;
  } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
    result.error = errno;
  }
  return result;
}

}  // namespace kolo::transport
