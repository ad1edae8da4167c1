// KOLO_CHECK(condition) << "message": the one way kolo code aborts on a broken invariant (a
// programmer error, which is never a Status; see STYLE.md "Errors"). When `condition` is false
// it writes "kolo: <file>:<line>: check failed: <condition>: <message>" to stderr and aborts;
// the message operands are only evaluated then. Usable from any thread. Internal to kolo: the
// public headers do not include it, so it adds no macro to an application's namespace.
#pragma once

#include <sstream>

namespace kolo::internal {

// Collects the message of a failed check; its destructor prints it and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();

  template <typename T>
  CheckFailure& operator<<(const T& value) {
    message_ << value;
    return *this;
  }

 private:
  const char* file_;
  int line_;
  const char* condition_;
  std::ostringstream message_;
};

// Turns the `CheckFailure << ...` chain into a void expression for the ?: in KOLO_CHECK.
// `&` binds more loosely than `<<` and more tightly than `?:`, so the whole chain is its operand.
struct CheckVoidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace kolo::internal

// An expression statement, so that `if (x) KOLO_CHECK(y) << "..."; else ...` parses as written.
#define KOLO_CHECK(condition)                      \
  (condition) ? static_cast<void>(0)               \
              : ::kolo::internal::CheckVoidify() & \
                    ::kolo::internal::CheckFailure(__FILE__, __LINE__, #condition)
