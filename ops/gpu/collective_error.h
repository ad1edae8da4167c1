// The one converter from NCCL's error space (ncclResult_t) to Status (STYLE.md: one converter
// per foreign error space). Backends pass the result code, ncclGetErrorString's text and
// ncclGetLastError's string, so that the message is what NCCL's users search for.
//
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "kolo/status.h"

namespace kolo::gpu {

// NCCL's result codes (nccl.h), the same in every NCCL since 2.12.
inline constexpr int kNcclSuccess = 0;
inline constexpr int kNcclUnhandledCudaError = 1;
inline constexpr int kNcclSystemError = 2;
inline constexpr int kNcclInternalError = 3;
inline constexpr int kNcclInvalidArgument = 4;
inline constexpr int kNcclInvalidUsage = 5;
inline constexpr int kNcclRemoteError = 6;
inline constexpr int kNcclInProgress = 7;

// "ncclRemoteError", ...; "ncclResult(<code>)" for a code outside the list.
std::string NcclResultName(int code);

// "`call`: `name` (`code`): `text`; last error: `last_error`" (without the last part when
// `last_error` is empty). The code says what the caller can do: a bad argument or usage is
// InvalidArgument; a lost peer (ncclRemoteError) Aborted, job-fatal; a system (socket) error
// Unavailable; anything else Internal.
Status CollectiveError(const std::string& call, int code, const std::string& text,
                       const std::string& last_error);

}  // namespace kolo::gpu
