// The one converter from a GPU runtime's error space to Status (STYLE.md: one converter per
// foreign error space). Backends pass the runtime's own error code, name and text, so that
// the message is what the CUDA documentation and forums use.
//
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "kolo/status.h"

namespace kolo::gpu {

// CUDA runtime error codes kolo reacts to (the values are CUDA's own; driver_types.h).
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorInvalidValue = 1;
inline constexpr int kCudaErrorMemoryAllocation = 2;
inline constexpr int kCudaErrorInvalidMemcpyDirection = 21;
inline constexpr int kCudaErrorInsufficientDriver = 35;
inline constexpr int kCudaErrorNoDevice = 100;
inline constexpr int kCudaErrorInvalidDevice = 101;
inline constexpr int kCudaErrorInvalidResourceHandle = 400;
inline constexpr int kCudaErrorNotReady = 600;
inline constexpr int kCudaErrorIllegalAddress = 700;

// "`call`: `name` (`code`): `text`", with a code that says what the caller can do: a bad
// argument is InvalidArgument; out of memory, no driver or no device Unavailable; anything
// else Internal.
Status DeviceError(const std::string& call, int code, const std::string& name,
                   const std::string& text);

// What DeviceCount says on a machine without a usable driver or device: "no usable CUDA
// driver (cudaGetDeviceCount: cudaErrorInsufficientDriver (35): ...)".
Status NoUsableDevice(const Status& cause);

}  // namespace kolo::gpu
