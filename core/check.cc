#include "core/check.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kolo::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition)
    : file_(file), line_(line), condition_(condition) {}

CheckFailure::~CheckFailure() {
  const std::string message = message_.str();
  // One fprintf, so that lines from threads failing at once do not interleave mid-line.
  std::fprintf(stderr, "kolo: %s:%d: check failed: %s%s%s\n", file_, line_, condition_,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace kolo::internal
