#include "core/errno_status.h"

#include <cerrno>
#include <cstring>

namespace kolo {

std::string ErrnoText(int err) {
  // glibc's strerrordesc_np/strerrorname_np return static strings: thread-safe, unlike strerror.
  const char* desc = strerrordesc_np(err);
  const char* name = strerrorname_np(err);
  std::string text = desc != nullptr ? desc : "unknown error";
  text += " (";
  text += name != nullptr ? name : "errno " + std::to_string(err);
  text += ")";
  return text;
}

bool IsConnectionClosed(int err) {
  return err == ECONNRESET || err == EPIPE || err == ECONNABORTED || err == ENOTCONN ||
         err == ESHUTDOWN;
}

Status ErrnoToStatus(int err, const std::string& context) {
  std::string message = context + ": " + ErrnoText(err);
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ENOTCONN:
    case ESHUTDOWN:
    case EHOSTUNREACH:
    case EHOSTDOWN:
    case ENETUNREACH:
    case ENETDOWN:
    case ENETRESET:
      return Unavailable(std::move(message));
    case ETIMEDOUT:
      return DeadlineExceeded(std::move(message));
    case EADDRINUSE:
    case EADDRNOTAVAIL:
    case EAFNOSUPPORT:
    case EINVAL:
      return InvalidArgument(std::move(message));
    default:
      return Internal(std::move(message));
  }
}

}  // namespace kolo
