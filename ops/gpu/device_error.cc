#include "ops/gpu/device_error.h"

#include "ops/gpu/device_api.h"

namespace kolo::gpu {

const char* CopyKindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return "host to device";
    case CopyKind::kDeviceToHost:
      return "device to host";
    case CopyKind::kDeviceToDevice:
      return "device to device";
  }
  return "unknown";
}

Status DeviceError(const std::string& call, int code, const std::string& name,
                   const std::string& text) {
  const std::string message = call + ": " + name + " (" + std::to_string(code) + "): " + text;
  switch (code) {
    case kCudaErrorInvalidValue:
    case kCudaErrorInvalidMemcpyDirection:
    case kCudaErrorInvalidDevice:
    case kCudaErrorInvalidResourceHandle:
      return InvalidArgument(message);
    case kCudaErrorMemoryAllocation:
    case kCudaErrorInsufficientDriver:
    case kCudaErrorNoDevice:
      return Unavailable(message);
    default:
      return Internal(message);
  }
}

Status NoUsableDevice(const Status& cause) {
  return Status(cause.code(), "no usable CUDA driver (" + cause.message() + ")");
}

}  // namespace kolo::gpu
