#include "ops/gpu/collective_error.h"

namespace kolo::gpu {

std::string NcclResultName(int code) {
  switch (code) {
    case kNcclSuccess:
      return "ncclSuccess";
    case kNcclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case kNcclSystemError:
      return "ncclSystemError";
    case kNcclInternalError:
      return "ncclInternalError";
    case kNcclInvalidArgument:
      return "ncclInvalidArgument";
    case kNcclInvalidUsage:
      return "ncclInvalidUsage";
    case kNcclRemoteError:
      return "ncclRemoteError";
    case kNcclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult(" + std::to_string(code) + ")";
  }
}

Status CollectiveError(const std::string& call, int code, const std::string& text,
                       const std::string& last_error) {
  std::string message =
      call + ": " + NcclResultName(code) + " (" + std::to_string(code) + "): " + text;
  if (!last_error.empty()) message += "; last error: " + last_error;
  switch (code) {
    case kNcclInvalidArgument:
    case kNcclInvalidUsage:
      return InvalidArgument(message);
    case kNcclRemoteError:
      return Aborted(message);
    case kNcclSystemError:
      return Unavailable(message);
    default:
      return Internal(message);
  }
}

}  // namespace kolo::gpu
