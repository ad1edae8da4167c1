#include "tests/support/sim_gpu/sim_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "ops/gpu/device_error.h"

namespace kolo::gpu::sim {
namespace {

// CUDA's own names and texts for the codes the simulator returns.
Status CudaError(const char* call, int code) {
  switch (code) {
    case kCudaErrorInvalidValue:
      return DeviceError(call, code, "cudaErrorInvalidValue", "invalid argument");
    case kCudaErrorMemoryAllocation:
      return DeviceError(call, code, "cudaErrorMemoryAllocation", "out of memory");
    case kCudaErrorInsufficientDriver:
      return DeviceError(call, code, "cudaErrorInsufficientDriver",
                         "CUDA driver version is insufficient for CUDA runtime version");
    case kCudaErrorInvalidDevice:
      return DeviceError(call, code, "cudaErrorInvalidDevice", "invalid device ordinal");
    case kCudaErrorInvalidResourceHandle:
      return DeviceError(call, code, "cudaErrorInvalidResourceHandle", "invalid resource handle");
    case kCudaErrorIllegalAddress:
      return DeviceError(call, code, "cudaErrorIllegalAddress",
                         "an illegal memory access was encountered");
    default:
      return DeviceError(call, code, "cudaErrorUnknown", "unknown error");
  }
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// The current device of each (host thread, SimDevice).
thread_local std::unordered_map<const void*, int> tls_device;

}  // namespace

// One simulated stream: its work runs in order on its own thread.
class SimDevice::Stream {
 public:
  Stream(int device, std::chrono::microseconds delay)
      : device_(device), delay_(delay), thread_([this] { Run(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  int device() const { return device_; }

  // `work` gets the stream's first error (OK while there is none): ordinary work does nothing
  // after an error, as a CUDA stream after a failed kernel; event markers record it.
  void Push(std::function<Status(const Status&)> work) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every enqueued operation ran
      std::function<Status(const Status&)> work = std::move(queue_.front());
      queue_.pop_front();
      const Status error = error_;
      lock.unlock();
      if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
      Status s = work(error);
      lock.lock();
      if (!s.ok() && error_.ok()) error_ = s;
    }
  }

  const int device_;
  const std::chrono::microseconds delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<Status(const Status&)>> queue_;  // guarded by mu_
  bool stopping_ = false;                                   // guarded by mu_
  Status error_;        // guarded by mu_: the stream's first failure
  std::thread thread_;  // last: starts after everything above exists
};

// A simulated event: markers that RecordEvent enqueues complete it; `recorded` counts the
// records, `completed` the highest record whose marker ran.
struct SimDevice::Event {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;                     // guarded by mu
  uint64_t completed = 0;                    // guarded by mu
  Status error;                              // guarded by mu: the error of the captured work
  std::chrono::steady_clock::time_point at;  // guarded by mu: when `completed` ran
  bool timing = false;
};

SimDevice::SimDevice() : SimDevice(Options{}) {}

SimDevice::SimDevice(const Options& options)
    : options_(options), used_(static_cast<size_t>(std::max(options.device_count, 0)), 0) {}

SimDevice::~SimDevice() {
  std::set<Stream*> streams;
  std::map<Event*, std::shared_ptr<Event>> events;
  std::map<uintptr_t, Allocation> allocations;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.swap(streams_);
    events.swap(events_);
    allocations.swap(allocations_);
  }
  for (Stream* s : streams) delete s;  // runs what was enqueued first
  events.clear();                      // markers the streams ran held the last other references
  for (auto& [base, a] : allocations) {
    munmap(reinterpret_cast<void*>(base), a.mapped);
    munmap(a.shadow, a.mapped);
  }
}

Status SimDevice::CheckDriver(const char* call) const {
  if (options_.no_driver) return CudaError(call, kCudaErrorInsufficientDriver);
  return Status::Ok();
}

int SimDevice::CurrentDevice() const {
  auto it = tls_device.find(this);
  return it == tls_device.end() ? 0 : it->second;
}

StatusOr<int> SimDevice::DeviceCount() {
  Status driver = CheckDriver("cudaGetDeviceCount");
  if (!driver.ok()) return NoUsableDevice(driver);
  return options_.device_count;
}

Status SimDevice::SetDevice(int device) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaSetDevice"));
  if (device < 0 || device >= options_.device_count) {
    return CudaError("cudaSetDevice", kCudaErrorInvalidDevice);
  }
  tls_device[this] = device;
  return Status::Ok();
}

StatusOr<int> SimDevice::GetDevice() {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaGetDevice"));
  return CurrentDevice();
}

const SimDevice::Allocation* SimDevice::Find(const void* ptr, size_t bytes, uintptr_t* base) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return nullptr;
  --it;
  const Allocation& a = it->second;
  if (p < it->first || p - it->first > a.bytes || bytes > a.bytes - (p - it->first)) {
    return nullptr;
  }
  if (base != nullptr) *base = it->first;
  return &a;
}

void* SimDevice::Shadow(const void* ptr, size_t bytes, int* device) const {
  std::lock_guard<std::mutex> lock(mu_);
  uintptr_t base = 0;
  const Allocation* a = Find(ptr, bytes, &base);
  if (a == nullptr || a->device < 0) return nullptr;
  if (device != nullptr) *device = a->device;
  return static_cast<char*>(a->shadow) + (reinterpret_cast<uintptr_t>(ptr) - base);
}

Status SimDevice::CheckDevicePointer(const void* ptr, size_t bytes, int device) {
  std::lock_guard<std::mutex> lock(mu_);
  const Allocation* a = Find(ptr, bytes, nullptr);
  if (a == nullptr || a->device < 0) {
    return InvalidArgument("not device memory: " + std::to_string(bytes) + " bytes at " +
                           std::to_string(reinterpret_cast<uintptr_t>(ptr)) +
                           " are host memory or past the end of a device allocation");
  }
  if (a->device != device) {
    return InvalidArgument("device memory of cuda:" + std::to_string(a->device) +
                           ", expected cuda:" + std::to_string(device));
  }
  return Status::Ok();
}

StatusOr<void*> SimDevice::Malloc(size_t bytes) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaMalloc"));
  const int device = CurrentDevice();
  const size_t mapped = std::max(PageSize(), (bytes + PageSize() - 1) / PageSize() * PageSize());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes > options_.memory_per_device - used_[device]) {
      return CudaError("cudaMalloc", kCudaErrorMemoryAllocation);
    }
    used_[device] += bytes;
  }
  // One memory file, two views: the device pointer faults on any host access.
  const int fd = memfd_create("kolo-sim-gpu", MFD_CLOEXEC);
  void* device_view = MAP_FAILED;
  void* shadow = MAP_FAILED;
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(mapped)) == 0) {
    device_view = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
    shadow = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (fd >= 0) close(fd);
  if (device_view == MAP_FAILED || shadow == MAP_FAILED) {
    if (device_view != MAP_FAILED) munmap(device_view, mapped);
    if (shadow != MAP_FAILED) munmap(shadow, mapped);
    std::lock_guard<std::mutex> lock(mu_);
    used_[device] -= bytes;
    return CudaError("cudaMalloc", kCudaErrorMemoryAllocation);
  }
  std::lock_guard<std::mutex> lock(mu_);
  allocations_[reinterpret_cast<uintptr_t>(device_view)] =
      Allocation{bytes, mapped, device, shadow};
  return device_view;
}

Status SimDevice::Free(void* ptr) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaFree"));
  if (ptr == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations_.end() || it->second.device < 0) {
    return CudaError("cudaFree", kCudaErrorInvalidValue);
  }
  used_[it->second.device] -= it->second.bytes;
  munmap(ptr, it->second.mapped);
  munmap(it->second.shadow, it->second.mapped);
  allocations_.erase(it);
  return Status::Ok();
}

StatusOr<void*> SimDevice::HostAlloc(size_t bytes) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaMallocHost"));
  const size_t mapped = std::max(PageSize(), (bytes + PageSize() - 1) / PageSize() * PageSize());
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CudaError("cudaMallocHost", kCudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(mu_);
  // Pinned host memory is host memory: its shadow is itself. munmap of `base` frees it.
  allocations_[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, mapped, -1, nullptr};
  return p;
}

Status SimDevice::HostFree(void* ptr) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaFreeHost"));
  if (ptr == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocations_.end() || it->second.device >= 0) {
    return CudaError("cudaFreeHost", kCudaErrorInvalidValue);
  }
  munmap(ptr, it->second.mapped);
  allocations_.erase(it);
  return Status::Ok();
}

SimDevice::Stream* SimDevice::StreamOf(StreamHandle handle) const {
  Stream* s = reinterpret_cast<Stream*>(handle);
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.count(s) != 0 ? s : nullptr;
}

std::shared_ptr<SimDevice::Event> SimDevice::EventOf(EventHandle handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = events_.find(reinterpret_cast<Event*>(handle));
  return it != events_.end() ? it->second : nullptr;
}

StatusOr<StreamHandle> SimDevice::CreateStream(bool /*high_priority*/) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaStreamCreateWithPriority"));
  auto* s = new Stream(CurrentDevice(), options_.op_delay);
  std::lock_guard<std::mutex> lock(mu_);
  streams_.insert(s);
  return reinterpret_cast<StreamHandle>(s);
}

Status SimDevice::DestroyStream(StreamHandle handle) {
  Stream* s = StreamOf(handle);
  if (s == nullptr) return CudaError("cudaStreamDestroy", kCudaErrorInvalidResourceHandle);
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.erase(s);
  }
  delete s;  // as in CUDA, work already enqueued still runs (here: before it returns)
  return Status::Ok();
}

StatusOr<EventHandle> SimDevice::CreateEvent(bool timing) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaEventCreateWithFlags"));
  auto e = std::make_shared<Event>();
  e->timing = timing;
  std::lock_guard<std::mutex> lock(mu_);
  events_.emplace(e.get(), e);
  return reinterpret_cast<EventHandle>(e.get());
}

Status SimDevice::DestroyEvent(EventHandle handle) {
  // As in CUDA, it returns at once; a marker or wait still queued holds the event until its
  // stream ran it, whether or not that stream failed meanwhile.
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.erase(reinterpret_cast<Event*>(handle)) == 0) {
    return CudaError("cudaEventDestroy", kCudaErrorInvalidResourceHandle);
  }
  return Status::Ok();
}

Status SimDevice::RecordEvent(EventHandle event, StreamHandle stream) {
  std::shared_ptr<Event> e = EventOf(event);
  Stream* s = StreamOf(stream);
  if (e == nullptr || s == nullptr) {
    return CudaError("cudaEventRecord", kCudaErrorInvalidResourceHandle);
  }
  uint64_t record;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    record = ++e->recorded;
  }
  // The marker runs after everything enqueued before it, and carries a failure of that work.
  s->Push([e, record](const Status& stream_error) -> Status {
    std::lock_guard<std::mutex> lock(e->mu);
    if (!stream_error.ok() && e->error.ok()) e->error = stream_error;
    e->completed = std::max(e->completed, record);
    e->at = std::chrono::steady_clock::now();
    e->cv.notify_all();
    return Status::Ok();
  });
  return Status::Ok();
}

Status SimDevice::StreamWaitEvent(StreamHandle stream, EventHandle event) {
  std::shared_ptr<Event> e = EventOf(event);
  Stream* s = StreamOf(stream);
  if (e == nullptr || s == nullptr) {
    return CudaError("cudaStreamWaitEvent", kCudaErrorInvalidResourceHandle);
  }
  uint64_t wanted;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    wanted = e->recorded;  // the capture at this call; a later record does not count
  }
  s->Push([e, wanted](const Status& stream_error) -> Status {
    if (!stream_error.ok()) return stream_error;
    std::unique_lock<std::mutex> lock(e->mu);
    e->cv.wait(lock, [&] { return e->completed >= wanted || !e->error.ok(); });
    return e->error;
  });
  return Status::Ok();
}

StatusOr<bool> SimDevice::QueryEvent(EventHandle event) {
  std::shared_ptr<Event> e = EventOf(event);
  if (e == nullptr) return CudaError("cudaEventQuery", kCudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(e->mu);
  if (!e->error.ok()) return e->error;
  return e->completed >= e->recorded;
}

Status SimDevice::SynchronizeEvent(EventHandle event) {
  std::shared_ptr<Event> e = EventOf(event);
  if (e == nullptr) return CudaError("cudaEventSynchronize", kCudaErrorInvalidResourceHandle);
  std::unique_lock<std::mutex> lock(e->mu);
  e->cv.wait(lock, [&] { return e->completed >= e->recorded || !e->error.ok(); });
  return e->error;
}

StatusOr<float> SimDevice::ElapsedMs(EventHandle start, EventHandle end) {
  std::shared_ptr<Event> a = EventOf(start);
  std::shared_ptr<Event> b = EventOf(end);
  if (a == nullptr || b == nullptr || !a->timing || !b->timing) {
    return CudaError("cudaEventElapsedTime", kCudaErrorInvalidResourceHandle);
  }
  std::chrono::steady_clock::time_point ta, tb;
  {
    std::lock_guard<std::mutex> lock(a->mu);
    if (a->recorded == 0 || a->completed < a->recorded) {
      return CudaError("cudaEventElapsedTime", kCudaErrorInvalidResourceHandle);
    }
    ta = a->at;
  }
  {
    std::lock_guard<std::mutex> lock(b->mu);
    if (b->recorded == 0 || b->completed < b->recorded) {
      return CudaError("cudaEventElapsedTime", kCudaErrorInvalidResourceHandle);
    }
    tb = b->at;
  }
  return std::chrono::duration<float, std::milli>(tb - ta).count();
}

Status SimDevice::CheckCopy(const char* call, void* dst, const void* src, size_t bytes,
                            CopyKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Allocation* d = Find(dst, bytes, nullptr);
  const Allocation* s = Find(src, bytes, nullptr);
  const bool dst_device = d != nullptr && d->device >= 0;
  const bool src_device = s != nullptr && s->device >= 0;
  const bool want_dst_device = kind != CopyKind::kDeviceToHost;
  const bool want_src_device = kind != CopyKind::kHostToDevice;
  if (dst_device != want_dst_device || src_device != want_src_device) {
    return CudaError(call, kCudaErrorInvalidValue)
        .WithContext(std::string(CopyKindName(kind)) + " copy of " + std::to_string(bytes) +
                     " bytes");
  }
  return Status::Ok();
}

Status SimDevice::Enqueue(StreamHandle stream, std::function<Status()> work) {
  Stream* s = StreamOf(stream);
  if (s == nullptr) return CudaError("cudaLaunchKernel", kCudaErrorInvalidResourceHandle);
  s->Push([work = std::move(work)](const Status& stream_error) -> Status {
    return stream_error.ok() ? work() : stream_error;
  });
  return Status::Ok();
}

Status SimDevice::MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                              StreamHandle stream) {
  return MemcpyBatchAsync({CopySpan{dst, src, bytes}}, kind, stream);
}

Status SimDevice::MemcpyBatchAsync(const std::vector<CopySpan>& copies, CopyKind kind,
                                   StreamHandle stream) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaMemcpyAsync"));
  if (StreamOf(stream) == nullptr) {
    return CudaError("cudaMemcpyAsync", kCudaErrorInvalidResourceHandle);
  }
  for (const CopySpan& c : copies) {
    KOLO_RETURN_IF_ERROR(CheckCopy("cudaMemcpyAsync", c.dst, c.src, c.bytes, kind));
  }
  return Enqueue(stream, [this, copies, kind]() -> Status {
    for (const CopySpan& c : copies) {
      if (c.bytes == 0) continue;
      // Translated when the copy runs: memory freed meanwhile is an illegal address.
      void* dst = kind == CopyKind::kDeviceToHost ? c.dst : Shadow(c.dst, c.bytes);
      const void* src = kind == CopyKind::kHostToDevice ? c.src : Shadow(c.src, c.bytes);
      if (dst == nullptr || src == nullptr) {
        return CudaError("cudaMemcpyAsync", kCudaErrorIllegalAddress);
      }
      std::memmove(dst, src, c.bytes);
    }
    return Status::Ok();
  });
}

Status SimDevice::MemsetAsync(void* dst, int value, size_t bytes, StreamHandle stream) {
  KOLO_RETURN_IF_ERROR(CheckDriver("cudaMemsetAsync"));
  if (Shadow(dst, bytes) == nullptr) return CudaError("cudaMemsetAsync", kCudaErrorInvalidValue);
  return Enqueue(stream, [this, dst, value, bytes]() -> Status {
    void* shadow = Shadow(dst, bytes);
    if (shadow == nullptr) return CudaError("cudaMemsetAsync", kCudaErrorIllegalAddress);
    std::memset(shadow, value, bytes);
    return Status::Ok();
  });
}

}  // namespace kolo::gpu::sim
