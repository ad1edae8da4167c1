#include "ops/gpu/staged_executor.h"

#include <thread>

namespace kolo::gpu {

StagedExecutor::StagedExecutor(DeviceApi* device, Executor* host, double timeout_seconds,
                               const Clock* clock)
    : device_(device),
      host_(host),
      timeout_seconds_(timeout_seconds),
      clock_(clock),
      pinned_(device) {}

StagedExecutor::~StagedExecutor() {
  if (done_ != nullptr) device_->DestroyEvent(done_).IgnoreError();
  if (stream_ != nullptr) device_->DestroyStream(stream_).IgnoreError();
}

Status StagedExecutor::Prepare(int device) {
  KOLO_RETURN_IF_ERROR(device_->SetDevice(device));
  if (stream_ != nullptr) {
    if (device != device_index_) {
      return InvalidArgument(
          "a rank uses one GPU: this one staged cuda:" + std::to_string(device_index_) +
          " before, now cuda:" + std::to_string(device));
    }
    return Status::Ok();
  }
  StatusOr<StreamHandle> stream = device_->CreateStream(/*high_priority=*/true);
  if (!stream.ok()) return stream.status();
  StatusOr<EventHandle> done = device_->CreateEvent(/*timing=*/false);
  if (!done.ok()) {
    device_->DestroyStream(*stream).IgnoreError();  // reporting the first failure
    return done.status();
  }
  stream_ = *stream;
  done_ = *done;
  device_index_ = device;
  return Status::Ok();
}

Status StagedExecutor::CopyAndWait(const std::vector<CopySpan>& copies, CopyKind kind,
                                   const std::string& what) {
  if (copies.empty()) return Status::Ok();
  KOLO_RETURN_IF_ERROR(device_->MemcpyBatchAsync(copies, kind, stream_));
  KOLO_RETURN_IF_ERROR(device_->RecordEvent(done_, stream_));
  const Clock::TimePoint deadline = clock_->Now() + DurationOf(timeout_seconds_);
  for (;;) {
    StatusOr<bool> done = device_->QueryEvent(done_);
    if (!done.ok()) return done.status().WithContext(what);
    if (*done) return Status::Ok();
    if (clock_->Now() >= deadline) {
      return DeadlineExceeded(what + ": the " + CopyKindName(kind) +
                              " copies did not finish within " + SecondsText(timeout_seconds_) +
                              " (KOLO_TIMEOUT_SECONDS)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

Status StagedExecutor::Stage(TensorEntry* e, Staged* staged, std::vector<CopySpan>* to_host) {
  auto h = std::make_unique<TensorEntry>();
  h->meta = e->meta;
  h->meta.device = Device::Cpu();
  h->received_splits = e->received_splits;
  h->int_result = e->int_result;
  StatusOr<void*> in = pinned_.Take(e->input.num_bytes());
  if (!in.ok()) return in.status();
  h->input = {*in, e->input.dtype, e->input.shape, Device::Cpu()};
  to_host->push_back(CopySpan{*in, e->input.data, e->input.num_bytes()});
  staged->entry = e;
  if (e->allocate) {
    // The output's size is known only now: the user's allocator gives the device memory, the
    // pool the host memory the collective writes.
    h->allocate = [this, e, staged](const std::vector<int64_t>& shape) -> void* {
      void* device_out = e->allocate(shape);
      if (device_out == nullptr) return nullptr;  // this rank's op fails (local_error)
      TensorView view{device_out, e->input.dtype, shape, e->input.device};
      StatusOr<void*> host_out = pinned_.Take(view.num_bytes());
      if (!host_out.ok()) return nullptr;
      e->output = view;
      staged->device_out = device_out;
      return *host_out;
    };
  } else if (e->output.data == e->input.data) {
    h->output = h->input;
    staged->device_out = e->output.data;
  } else {
    StatusOr<void*> out = pinned_.Take(e->output.num_bytes());
    if (!out.ok()) return out.status();
    h->output = {*out, e->output.dtype, e->output.shape, Device::Cpu()};
    staged->device_out = e->output.data;
  }
  staged->host = std::move(h);
  return Status::Ok();
}

Status StagedExecutor::Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                               PhaseObserver* observer) {
  int device = -1;
  for (const TensorEntry* e : entries) {
    if (!e->input.device.is_cpu()) device = e->input.device.index;
  }
  if (device < 0) return host_->Execute(response, entries, observer);  // nothing to stage
  KOLO_RETURN_IF_ERROR(Prepare(device));
  const std::string what = std::string(OpTypeName(response.op)) + " of " +
                           std::to_string(entries.size()) + " tensor(s) staged through the host";
  pinned_.Reset();

  // Host views of the same entries; CPU stand-ins of a joined rank pass as they are.
  std::vector<Staged> staged;
  staged.reserve(entries.size());  // never moves: the allocators refer to its elements
  std::vector<TensorEntry*> host_entries;
  std::vector<CopySpan> to_host;
  for (TensorEntry* e : entries) {
    if (e->input.device.is_cpu()) {
      host_entries.push_back(e);
      continue;
    }
    staged.emplace_back();
    const Status status = Stage(e, &staged.back(), &to_host);
    if (!status.ok()) return status.WithContext(what);
    host_entries.push_back(staged.back().host.get());
  }

  Clock::TimePoint start = clock_->Now();
  KOLO_RETURN_IF_ERROR(CopyAndWait(to_host, CopyKind::kDeviceToHost, what));
  if (observer != nullptr) observer->OnPhase("MEMCPY_DEVICE_TO_HOST", start, clock_->Now());
  KOLO_RETURN_IF_ERROR(host_->Execute(response, host_entries, observer));

  std::vector<CopySpan> to_device;
  for (const Staged& s : staged) {
    s.entry->local_error = s.host->local_error;
    if (s.device_out == nullptr || !s.entry->local_error.ok()) continue;
    to_device.push_back(CopySpan{s.device_out, s.host->output.data, s.host->output.num_bytes()});
  }
  start = clock_->Now();
  KOLO_RETURN_IF_ERROR(CopyAndWait(to_device, CopyKind::kHostToDevice, what));
  if (observer != nullptr) observer->OnPhase("MEMCPY_HOST_TO_DEVICE", start, clock_->Now());
  return Status::Ok();
}

}  // namespace kolo::gpu
