// GpuExecutor's life cycle: launching a response (device, stream, communicator, stand-ins,
// events), handing it to the completion thread, and what it holds until then. The collectives
// themselves are in gpu_executor_ops.cc.
#include "ops/gpu/gpu_executor.h"

#include <utility>

#include "core/op_text.h"

namespace kolo::gpu {
namespace {

bool OnDevice(const TensorEntry& e) {
  return !e.input.device.is_cpu();
}

}  // namespace

GpuExecutor::GpuExecutor(DeviceApi* device, CollectiveApi* collectives, CommProvider comms,
                         const Config& config, Logger logger)
    : device_(device),
      coll_(collectives),
      comms_(std::move(comms)),
      config_(config),
      logger_(std::move(logger)),
      pool_(device) {
  queue_ = std::make_unique<CompletionQueue>(
      device_, config_.completion, [this] { return CommHealth(); },
      [this](const Status& why) { AbortComm(why); }, logger_);
}

GpuExecutor::~GpuExecutor() {
  // Device work of an op still pending may wait for peers that will never run theirs.
  if (queue_->pending() > 0) {
    AbortComm(ShutdownError("kolo was shut down with device ops in flight"));
  }
  queue_.reset();  // fails what is left; joins the completion thread
  // The stream first: the device finishes (or fails) what is queued on it before the memory
  // and events it names go.
  if (stream_ != nullptr) device_->DestroyStream(stream_).IgnoreError();  // nothing to tell
  if (fusion_buffer_ != nullptr) device_->Free(fusion_buffer_).IgnoreError();
  // pool_ goes next (a member), with the events and the failed ops' memory.
}

Status GpuExecutor::Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                            PhaseObserver* /*observer*/) {
  return Internal(DescribeOp(response.op, entries) +
                  ": the GPU executor only launches (RunsAsync), it does not execute");
}

size_t GpuExecutor::pending() const {
  return queue_->pending();
}

Status GpuExecutor::Prepare(const std::vector<TensorEntry*>& entries) {
  int device = -1;
  const TensorEntry* first = nullptr;
  for (const TensorEntry* e : entries) {
    if (!OnDevice(*e)) continue;
    if (first == nullptr) {
      first = e;
      device = e->input.device.index;
    }
    // An output an allocator provides later has no device yet.
    for (const Device d :
         {e->input.device, e->output.data != nullptr ? e->output.device : e->input.device}) {
      if (d != Device::Cuda(device)) {
        return InvalidArgument("a rank uses one GPU: '" + first->meta.name + "' is on " +
                               DeviceName(first->input.device) + ", '" + e->meta.name + "' on " +
                               DeviceName(d));
      }
    }
  }
  if (device < 0) device = device_index_ >= 0 ? device_index_ : config_.device;
  if (device < 0) {
    return Internal("no device tensor of this rank, and no device configured for its stand-ins");
  }
  if (stream_ != nullptr && device != device_index_) {
    return InvalidArgument(
        "a rank uses one GPU: this one ran on cuda:" + std::to_string(device_index_) +
        " before, now cuda:" + std::to_string(device));
  }
  KOLO_RETURN_IF_ERROR(device_->SetDevice(device));
  if (stream_ == nullptr) {
    StatusOr<StreamHandle> stream = device_->CreateStream(/*high_priority=*/true);
    if (!stream.ok()) return stream.status();
    stream_ = *stream;
    device_index_ = device;
  }
  StatusOr<CommHandle> comm = comms_(device);
  if (!comm.ok()) return comm.status();
  MutexLock lock(&comm_mu_);
  if (comm_ != *comm) {
    comm_ = *comm;
    aborted_ = false;
  }
  return Status::Ok();
}

Status GpuExecutor::Launch(const Response& response, const std::vector<TensorEntry*>& entries,
                           PhaseObserver* observer, Done done) {
  auto op = std::make_shared<Op>();
  op->what = DescribeOp(response.op, entries);
  const bool moves_data = response.op != OpType::kJoin && response.op != OpType::kBarrier;
  Status status;
  if (!moves_data && stream_ == nullptr) {
    // Nothing was launched before it: done at once (an event never recorded is complete), on
    // the completion thread like every op, without choosing a device.
    StatusOr<EventHandle> event = pool_.Take();
    if (!event.ok()) return event.status().WithContext(op->what);
    op->events.push_back(*event);
    op->last = *event;
  } else {
    status = Prepare(entries);
    if (status.ok()) status = Begin(*op);
  }
  // Stand-ins: a joined rank contributes zeros, on the device, and drops the result.
  std::vector<TensorEntry*> work = entries;
  for (size_t i = 0; moves_data && status.ok() && i < work.size(); ++i) {
    if (OnDevice(*work[i])) continue;
    auto stand_in = std::make_unique<TensorEntry>();
    stand_in->meta = work[i]->meta;
    const size_t bytes = work[i]->input.num_bytes();
    StatusOr<void*> zeros = device_->Malloc(bytes > 0 ? bytes : 1);
    if (!zeros.ok()) {
      status = zeros.status();
      break;
    }
    op->buffers.push_back(*zeros);
    if (bytes > 0) status = device_->MemsetAsync(*zeros, 0, bytes, stream_);
    stand_in->input = {*zeros, work[i]->input.dtype, work[i]->input.shape,
                       Device::Cuda(device_index_)};
    stand_in->output = stand_in->input;
    work[i] = stand_in.get();
    op->stand_ins.push_back(std::move(stand_in));
  }
  // The inputs are ready where the caller says so.
  for (size_t i = 0; moves_data && status.ok() && config_.ready_event && i < entries.size(); ++i) {
    if (EventHandle ready = config_.ready_event(*entries[i]); ready != nullptr) {
      status = device_->StreamWaitEvent(stream_, ready);
    }
  }
  if (status.ok() && stream_ != nullptr) status = Enqueue(response, work, *op);
  if (!status.ok()) {
    // Part of the op may be queued on the stream: keep what it names until the end.
    pool_.Retire(&op->events, &op->buffers);
    return status.WithContext(op->what);
  }
  CompletionQueue::Item item;
  item.what = op->what;
  item.finished = op->last;
  item.phases = op->phases;
  item.observer = observer;
  item.done = std::move(done);
  item.release = [this, op] { Release(*op); };
  queue_->Push(std::move(item));
  return Status::Ok();
}

void GpuExecutor::Interrupt(const Status& why) {
  // Kernels of the ops still queued may wait for peers that are gone: only the abort ends them.
  // The queue hears the cause first, so that no op fails with the abort's own error instead.
  const bool in_flight = queue_->pending() > 0;
  queue_->Interrupt(why);
  if (in_flight) AbortComm(why);
}

Status GpuExecutor::Begin(Op& op) {
  StatusOr<EventHandle> start = pool_.Take();
  if (!start.ok()) return start.status();
  op.events.push_back(*start);
  op.last = *start;
  return device_->RecordEvent(*start, stream_);
}

Status GpuExecutor::EndPhase(Op& op, const char* name) {
  StatusOr<EventHandle> end = pool_.Take();
  if (!end.ok()) return end.status();
  op.events.push_back(*end);
  KOLO_RETURN_IF_ERROR(device_->RecordEvent(*end, stream_));
  op.phases.push_back(CompletionQueue::Phase{name, op.last, *end});
  op.last = *end;
  return Status::Ok();
}

StatusOr<uint8_t*> GpuExecutor::Scratch(size_t bytes, Op& op) {
  if (bytes == 0) bytes = 1;  // a valid pointer nothing is read from
  if (bytes <= config_.fusion_threshold_bytes) {
    if (fusion_buffer_ == nullptr) {
      // Once, at the first fused op: ops run in stream order, so each reuses it safely.
      StatusOr<void*> buffer = device_->Malloc(config_.fusion_threshold_bytes);
      if (!buffer.ok()) return buffer.status().WithContext("the fusion buffer");
      fusion_buffer_ = static_cast<uint8_t*>(*buffer);
    }
    return fusion_buffer_;
  }
  StatusOr<void*> own = device_->Malloc(bytes);
  if (!own.ok()) return own.status();
  op.buffers.push_back(*own);
  return static_cast<uint8_t*>(*own);
}

void GpuExecutor::Release(Op& op) {
  StatusOr<bool> done = device_->QueryEvent(op.last);
  if (done.ok() && *done) {
    pool_.GiveBack(&op.events);
    for (void* p : op.buffers) device_->Free(p).IgnoreError();  // a leak at worst
    op.buffers.clear();
  } else {
    // The op failed or was interrupted: the device may still read or write these.
    pool_.Retire(&op.events, &op.buffers);
  }
  op.stand_ins.clear();
}

Status GpuExecutor::CommHealth() {
  MutexLock lock(&comm_mu_);
  if (comm_ == nullptr) return Status::Ok();
  StatusOr<CommState> state = coll_->PollComm(comm_);
  return state.status();
}

void GpuExecutor::AbortComm(const Status& why) {
  MutexLock lock(&comm_mu_);
  if (comm_ == nullptr || aborted_) return;
  aborted_ = true;
  logger_->warn("aborting the {} communicator: {}", coll_->name(), why.message());
  const Status aborted = coll_->Abort(comm_);
  if (!aborted.ok()) logger_->error("{}", aborted.message());
}

}  // namespace kolo::gpu
