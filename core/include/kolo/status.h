// Status and StatusOr<T>: how every kolo API reports failure. kolo never throws.
// A Status is a code plus a message that names what went wrong (rank, tensor, variable).
// Value types; safe to copy between threads.
#pragma once

#include <cassert>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace kolo {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input to one op or to init(); local to the call
  kFailedPrecondition,  // e.g. enqueue before init() or after shutdown()
  kMismatch,            // ranks disagreed about one op; that op failed on every rank
  kAborted,             // job-fatal: a peer or the controller was lost; every op fails
  kDeadlineExceeded,    // a wait passed its configured deadline (job-fatal)
  kUnavailable,         // a connection could not be made or was closed
  kInternal,            // a broken invariant inside kolo or a third-party library
  kShutdown,            // the runtime was shut down before the op completed
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "ABORTED: rank 2 lost ..." or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(const std::string& context) const;

  // Explicitly drops a status where ignoring it is correct (say why at the call site).
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline bool operator==(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}

// Convenience constructors, one per code.
inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Mismatch(std::string m) {
  return {StatusCode::kMismatch, std::move(m)};
}
inline Status Aborted(std::string m) {
  return {StatusCode::kAborted, std::move(m)};
}
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Unavailable(std::string m) {
  return {StatusCode::kUnavailable, std::move(m)};
}
inline Status Internal(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}
inline Status ShutdownError(std::string m) {
  return {StatusCode::kShutdown, std::move(m)};
}

namespace internal {
// Prints "kolo: value() of a failed StatusOr: <status>" to stderr and aborts.
[[noreturn]] void DieOnValueOfFailedStatusOr(const Status& status);
}  // namespace internal

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Internal("StatusOr constructed from an OK status without a value");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    CheckOk();
    return *value_;
  }
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  T* operator->() {
    CheckOk();
    return &*value_;
  }
  const T* operator->() const {
    CheckOk();
    return &*value_;
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  // A programmer error: value() of a failed StatusOr. Aborts, printing the status.
  void CheckOk() const {
    if (!status_.ok()) internal::DieOnValueOfFailedStatusOr(status_);
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace kolo

// Early returns for code that returns Status or StatusOr<U>. Both are statements; they may be
// used by applications as well as by kolo itself.
//
// KOLO_RETURN_IF_ERROR(expr): evaluates `expr` (a Status) once and returns it when not OK.
// `expr` may contain commas (a lambda argument, say).
#define KOLO_RETURN_IF_ERROR(...)                                      \
  do {                                                                 \
    const ::kolo::Status kolo_return_if_error_status_ = (__VA_ARGS__); \
    if (!kolo_return_if_error_status_.ok()) {                          \
      return kolo_return_if_error_status_;                             \
    }                                                                  \
  } while (0)

// KOLO_ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (a StatusOr<T>) once; returns its status
// when not OK, else moves the value into `lhs`, which may declare a variable
// (`KOLO_ASSIGN_OR_RETURN(auto port, FindFreePort());`) or name an existing one. It expands to
// several statements, so it cannot be the body of an unbraced if or loop. `lhs` may not
// contain a top-level comma (write `auto`); `expr` may.
#define KOLO_ASSIGN_OR_RETURN(lhs, ...) \
  KOLO_ASSIGN_OR_RETURN_IMPL_(KOLO_STATUS_CONCAT_(kolo_status_or_, __COUNTER__), lhs, __VA_ARGS__)

#define KOLO_ASSIGN_OR_RETURN_IMPL_(temporary, lhs, ...) \
  auto temporary = (__VA_ARGS__);                        \
  if (!temporary.ok()) return temporary.status();        \
  lhs = std::move(temporary).value()
#define KOLO_STATUS_CONCAT_(a, b) KOLO_STATUS_CONCAT_INNER_(a, b)
#define KOLO_STATUS_CONCAT_INNER_(a, b) a##b
