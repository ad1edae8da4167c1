#include "runtime/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace kolo {

FdLimitChange RaiseFdLimitToHard() {
  FdLimitChange change;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    change.error = std::string("getrlimit: ") + std::strerror(errno);
    return change;
  }
  change.before = change.after = static_cast<uint64_t>(limit.rlim_cur);
  if (limit.rlim_cur == limit.rlim_max) return change;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    change.error = std::string("setrlimit: ") + std::strerror(errno);
    return change;
  }
  change.after = static_cast<uint64_t>(limit.rlim_cur);
  return change;
}

}  // namespace kolo
