#include "ops/cuda/cuda_device_api.h"

#include <cuda_runtime_api.h>

#include "ops/gpu/device_error.h"

namespace kolo::gpu {
namespace {

Status Check(const char* call, cudaError_t err) {
  if (err == cudaSuccess) return Status::Ok();
  cudaGetLastError();  // the runtime keeps the last error; clear it so it is reported once
  return DeviceError(call, static_cast<int>(err), cudaGetErrorName(err), cudaGetErrorString(err));
}

cudaStream_t Raw(StreamHandle s) {
  return reinterpret_cast<cudaStream_t>(s);
}
cudaEvent_t Raw(EventHandle e) {
  return reinterpret_cast<cudaEvent_t>(e);
}

cudaMemcpyKind Raw(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

}  // namespace

StatusOr<int> CudaDeviceApi::DeviceCount() {
  int count = 0;
  Status s = Check("cudaGetDeviceCount", cudaGetDeviceCount(&count));
  if (!s.ok()) return NoUsableDevice(s);
  return count;
}

Status CudaDeviceApi::SetDevice(int device) {
  return Check("cudaSetDevice", cudaSetDevice(device));
}

StatusOr<int> CudaDeviceApi::GetDevice() {
  int device = -1;
  KOLO_RETURN_IF_ERROR(Check("cudaGetDevice", cudaGetDevice(&device)));
  return device;
}

Status CudaDeviceApi::CheckDevicePointer(const void* ptr, size_t bytes, int device) {
  cudaPointerAttributes attributes{};
  KOLO_RETURN_IF_ERROR(
      Check("cudaPointerGetAttributes", cudaPointerGetAttributes(&attributes, ptr)));
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    return InvalidArgument("not device memory: " + std::to_string(bytes) + " bytes at " +
                           std::to_string(reinterpret_cast<uintptr_t>(ptr)) + " are host memory");
  }
  if (attributes.device != device) {
    return InvalidArgument("device memory of cuda:" + std::to_string(attributes.device) +
                           ", expected cuda:" + std::to_string(device));
  }
  return Status::Ok();
}

StatusOr<void*> CudaDeviceApi::Malloc(size_t bytes) {
  void* p = nullptr;
  KOLO_RETURN_IF_ERROR(Check("cudaMalloc", cudaMalloc(&p, bytes)));
  return p;
}

Status CudaDeviceApi::Free(void* ptr) {
  return Check("cudaFree", cudaFree(ptr));
}

StatusOr<void*> CudaDeviceApi::HostAlloc(size_t bytes) {
  void* p = nullptr;
  KOLO_RETURN_IF_ERROR(Check("cudaMallocHost", cudaMallocHost(&p, bytes)));
  return p;
}

Status CudaDeviceApi::HostFree(void* ptr) {
  return Check("cudaFreeHost", cudaFreeHost(ptr));
}

StatusOr<StreamHandle> CudaDeviceApi::CreateStream(bool high_priority) {
  int least = 0, greatest = 0;
  KOLO_RETURN_IF_ERROR(Check("cudaDeviceGetStreamPriorityRange",
                             cudaDeviceGetStreamPriorityRange(&least, &greatest)));
  cudaStream_t stream = nullptr;
  KOLO_RETURN_IF_ERROR(Check("cudaStreamCreateWithPriority",
                             cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                                          high_priority ? greatest : least)));
  return reinterpret_cast<StreamHandle>(stream);
}

Status CudaDeviceApi::DestroyStream(StreamHandle stream) {
  return Check("cudaStreamDestroy", cudaStreamDestroy(Raw(stream)));
}

StatusOr<EventHandle> CudaDeviceApi::CreateEvent(bool timing) {
  cudaEvent_t event = nullptr;
  KOLO_RETURN_IF_ERROR(
      Check("cudaEventCreateWithFlags",
            cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming)));
  return reinterpret_cast<EventHandle>(event);
}

Status CudaDeviceApi::DestroyEvent(EventHandle event) {
  return Check("cudaEventDestroy", cudaEventDestroy(Raw(event)));
}

Status CudaDeviceApi::RecordEvent(EventHandle event, StreamHandle stream) {
  return Check("cudaEventRecord", cudaEventRecord(Raw(event), Raw(stream)));
}

Status CudaDeviceApi::StreamWaitEvent(StreamHandle stream, EventHandle event) {
  return Check("cudaStreamWaitEvent", cudaStreamWaitEvent(Raw(stream), Raw(event), 0));
}

StatusOr<bool> CudaDeviceApi::QueryEvent(EventHandle event) {
  const cudaError_t err = cudaEventQuery(Raw(event));
  if (err == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: clear it
    return false;
  }
  KOLO_RETURN_IF_ERROR(Check("cudaEventQuery", err));
  return true;
}

Status CudaDeviceApi::SynchronizeEvent(EventHandle event) {
  return Check("cudaEventSynchronize", cudaEventSynchronize(Raw(event)));
}

StatusOr<float> CudaDeviceApi::ElapsedMs(EventHandle start, EventHandle end) {
  float ms = 0;
  KOLO_RETURN_IF_ERROR(
      Check("cudaEventElapsedTime", cudaEventElapsedTime(&ms, Raw(start), Raw(end))));
  return ms;
}

Status CudaDeviceApi::MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                                  StreamHandle stream) {
  if (bytes == 0) return Status::Ok();
  Status s = Check("cudaMemcpyAsync", cudaMemcpyAsync(dst, src, bytes, Raw(kind), Raw(stream)));
  if (s.ok()) return s;
  return s.WithContext(std::string(CopyKindName(kind)) + " copy of " + std::to_string(bytes) +
                       " bytes");
}

Status CudaDeviceApi::MemcpyBatchAsync(const std::vector<CopySpan>& copies, CopyKind kind,
                                       StreamHandle stream) {
  // One call per copy; cudaMemcpyBatchAsync (CUDA >= 12.8) would save the launches.
  for (const CopySpan& c : copies) {
    KOLO_RETURN_IF_ERROR(MemcpyAsync(c.dst, c.src, c.bytes, kind, stream));
  }
  return Status::Ok();
}

Status CudaDeviceApi::MemsetAsync(void* dst, int value, size_t bytes, StreamHandle stream) {
  return Check("cudaMemsetAsync", cudaMemsetAsync(dst, value, bytes, Raw(stream)));
}

}  // namespace kolo::gpu
