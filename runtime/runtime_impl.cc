#include "runtime/runtime_impl.h"

#include <algorithm>

#include "controller/controller.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/op_validation.h"
#include "core/spin_wait.h"
#include "ops/cpu_executor.h"
#include "transport/deadline.h"
#include "transport/p2p/p2p_lane.h"

namespace kolo {
namespace {

using SteadyTime = std::chrono::steady_clock;

// Makes `meta` (already validated for its set) the op of this thread's process set: the scoped
// name and group, the set's id. Fails for ops a set cannot run.
Status ScopeToSet(TensorMeta* meta, int id) {
  const std::string what = OpTypeName(meta->op) + " '" + meta->name + "'";
  if (!meta->device.is_cpu()) {
    return InvalidArgument(what + " in process set " + std::to_string(id) +
                           ": process sets run CPU tensors only (GPU tensors: the global set)");
  }
  if (meta->name.find(" [process set ") != std::string::npos) {
    return InvalidArgument(what + ": ' [process set ' is reserved in names");
  }
  meta->name = ScopedName(id, meta->name);
  if (!meta->group.empty()) meta->group = ScopedName(id, meta->group);
  meta->process_set = id;
  return Status::Ok();
}

}  // namespace

RuntimeImpl::RuntimeImpl(const Options& options, spdlog::level::level_enum level)
    : options_(options),
      logger_(MakeLogger(options.rank, "runtime", level)),
      timeline_(options.rank, options.size, SteadyClock::Get()),
      tracer_(&timeline_, options.rank),
      sets_(options.rank, options.size),
      planes_(options_, logger_) {
  timeline_.set_max_bytes(options.timeline_max_mb << 20);
}

RuntimeImpl::~RuntimeImpl() {
  // Programmer error: the background thread cannot join itself.
  KOLO_CHECK(!BackgroundLoop::IsBackgroundThread() || shut_down_)
      << "a Runtime was destroyed from one of its callbacks";
  Shutdown().IgnoreError(); /* destructor: nobody to tell */
}

StatusOr<SetMembership> RuntimeImpl::CurrentMembership(const std::string& what) const {
  return sets_.Resolve(CurrentProcessSet(), what);
}

StatusOr<int> RootInSet(const ProcessSets& sets, const SetMembership& set, int root,
                        const std::string& what) {
  if (set.id == 0) return root;
  const std::vector<int> ranks = sets.Members(set.id);
  auto it = std::find(ranks.begin(), ranks.end(), root);
  if (it == ranks.end()) {
    std::string members;
    for (size_t i = 0; i < ranks.size(); ++i) {
      members += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return InvalidArgument(what + ": root rank " + std::to_string(root) +
                           " is not in process set " + std::to_string(set.id) + " (ranks [" +
                           members + "])");
  }
  return static_cast<int>(it - ranks.begin());
}

Status RuntimeImpl::Enqueue(TensorMeta meta, const TensorView& input, const TensorView& output,
                            Callback callback, Allocator allocate,
                            std::vector<int64_t>* received_splits, int* int_result) {
  const int set = CurrentProcessSet();
  if (set == 0 || meta.op == OpType::kAddProcessSet || meta.op == OpType::kRemoveProcessSet) {
    return EnqueueScoped(std::move(meta), input, output, std::move(callback), std::move(allocate),
                         received_splits, int_result);
  }
  const std::string what = OpTypeName(meta.op) + " '" + meta.name + "'";
  KOLO_RETURN_IF_ERROR(ScopeToSet(&meta, set));
  // Under the registry's lock: a removal of the set cannot overtake this op.
  return sets_.Enqueue(set, what, [&] {
    return EnqueueScoped(std::move(meta), input, output, std::move(callback), std::move(allocate),
                         received_splits, int_result);
  });
}

Status RuntimeImpl::EnqueueScoped(TensorMeta meta, const TensorView& input,
                                  const TensorView& output, Callback callback, Allocator allocate,
                                  std::vector<int64_t>* received_splits, int* int_result) {
  if (!meta.device.is_cpu()) KOLO_RETURN_IF_ERROR(gpu_->CheckOp(meta, input, output));
  std::unique_ptr<TensorEntry> entry = queue_.NewEntry();  // a completed op's, when there is one
  entry->meta = std::move(meta);
  entry->input = input;
  entry->output = output;
  entry->callback = std::move(callback);
  entry->allocate = std::move(allocate);
  entry->received_splits = received_splits;
  entry->int_result = int_result;
  entry->enqueued_at = SteadyTime::now();
  // The span opens before the entry is queued, so its begin precedes everything the
  // background thread records for it.
  tracer_.Begin(*entry);
  Status queued = queue_.Enqueue(std::move(entry));  // leaves `entry` with us on failure
  if (!queued.ok()) tracer_.Abandon(*entry, queued);
  return queued;
}

Status RuntimeImpl::EnqueueGroup(std::vector<TensorMeta> metas,
                                 const std::vector<TensorView>& inputs,
                                 const std::vector<TensorView>& outputs, Callback callback,
                                 std::vector<Allocator> allocators) {
  const int set = CurrentProcessSet();
  if (set == 0 || metas.empty()) {
    return EnqueueGroupScoped(std::move(metas), inputs, outputs, std::move(callback),
                              std::move(allocators));
  }
  const std::string what = "grouped " + OpTypeName(metas[0].op) + " '" + metas[0].name + "'";
  for (TensorMeta& meta : metas) KOLO_RETURN_IF_ERROR(ScopeToSet(&meta, set));
  return sets_.Enqueue(set, what, [&] {
    return EnqueueGroupScoped(std::move(metas), inputs, outputs, std::move(callback),
                              std::move(allocators));
  });
}

Status RuntimeImpl::EnqueueGroupScoped(std::vector<TensorMeta> metas,
                                       const std::vector<TensorView>& inputs,
                                       const std::vector<TensorView>& outputs, Callback callback,
                                       std::vector<Allocator> allocators) {
  // One user callback for the group: it runs once the last member completed, with the first
  // failure if any member failed.
  struct Group {
    Group(size_t members, Callback done) : left(members), callback(std::move(done)) {}
    Mutex mu;
    size_t left KOLO_GUARDED_BY(mu);
    Status first_error KOLO_GUARDED_BY(mu);
    const Callback callback;
  };
  for (size_t i = 0; i < metas.size(); ++i) {
    if (!metas[i].device.is_cpu()) {
      KOLO_RETURN_IF_ERROR(gpu_->CheckOp(metas[i], inputs[i], outputs[i]));
    }
  }
  auto group = std::make_shared<Group>(metas.size(), std::move(callback));
  std::vector<std::unique_ptr<TensorEntry>> entries;
  const SteadyTime::time_point now = SteadyTime::now();
  for (size_t i = 0; i < metas.size(); ++i) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta = std::move(metas[i]);
    entry->input = inputs[i];
    entry->output = outputs[i];
    if (!allocators.empty()) entry->allocate = std::move(allocators[i]);
    entry->enqueued_at = now;
    entry->callback = [group](const Status& s) {
      Status result;
      {
        MutexLock lock(&group->mu);
        if (!s.ok() && group->first_error.ok()) group->first_error = s;
        if (--group->left != 0) return;
        result = group->first_error;
      }
      if (group->callback) group->callback(result);
    };
    tracer_.Begin(*entry);
    entries.push_back(std::move(entry));
  }
  Status queued = queue_.EnqueueGroup(entries);  // leaves `entries` with us on failure
  if (!queued.ok()) {
    for (auto& entry : entries) tracer_.Abandon(*entry, queued);
  }
  return queued;
}

Status RuntimeImpl::AddProcessSetAsync(const std::vector<int>& ranks, int* id, Callback callback,
                                       const std::string& static_sets) {
  KOLO_ASSIGN_OR_RETURN(std::vector<int> sorted, CheckSetRanks(ranks, options_.size));
  TensorMeta meta = BarrierMeta(kAddProcessSetName, OpType::kAddProcessSet);
  meta.splits.assign(sorted.begin(), sorted.end());
  meta.group = static_sets;  // compared by the controller; never a grouped op's key here
  TensorView none;
  none.dtype = DataType::kUInt8;
  none.shape = {0};
  return EnqueueScoped(std::move(meta), none, none, std::move(callback), nullptr, nullptr, id);
}

Status RuntimeImpl::RemoveProcessSetAsync(int id, Callback callback) {
  KOLO_RETURN_IF_ERROR(sets_.BeginRemove(id));
  TensorMeta meta = BarrierMeta(kRemoveProcessSetName, OpType::kRemoveProcessSet);
  meta.root = id;
  TensorView none;
  none.dtype = DataType::kUInt8;
  none.shape = {0};
  Status queued =
      EnqueueScoped(std::move(meta), none, none, std::move(callback), nullptr, nullptr, nullptr);
  if (!queued.ok()) sets_.EndRemove(id);
  return queued;
}

bool RuntimeImpl::DriveOrSpin(const std::function<bool()>& done) {
  if (done()) return true;  // a point-to-point op its Post or Drive finished: nothing to wake
  // A point-to-point op is waited for: its transfer runs on this thread (the lane outlives the
  // runtime's teardown, so no lock is needed to use it).
  if (transport::P2pLane* lane = planes_.p2p(); lane != nullptr && lane->busy()) {
    return lane->Drive(done, wait_spin_);
  }
  // Never waits for shutdown() (or a timeline start or stop) on another thread: the loop may
  // be going away then, and this call only watches its op.
  if (wait_spin_ > std::chrono::microseconds::zero() && lifecycle_mu_.TryLock()) {
    const bool drove = !shut_down_ && loop_ != nullptr && loop_->Drive(done, wait_spin_);
    lifecycle_mu_.Unlock();
    if (drove) return done();
  }
  wakeup_.Notify();  // the enqueue left the wake-up to this call (TensorQueue::QuietScope)
  return SpinWait(done, wait_spin_);
}

Status RuntimeImpl::RawAllreduce(void* data, int64_t count, DataType dtype) {
  Response response;
  response.op = OpType::kAllreduce;
  response.dtype = dtype;
  response.names = {"kolo.raw"};
  response.cache_ids = {0};
  response.num_elements = {count};
  TensorEntry entry;
  entry.meta.name = "kolo.raw";
  entry.input = entry.output = TensorView{data, dtype, {count}, Device::Cpu()};
  Status result;
  // On this thread: the data plane alone, without the hand-off to the background thread.
  KOLO_RETURN_IF_ERROR(loop_->RunWithDataPlane(
      [&] { result = planes_.executor()->Execute(response, {&entry}, nullptr); }));
  return result;
}

Status RuntimeImpl::StartTimeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) return InvalidArgument("start_timeline() needs a file path");
  MutexLock lock(&lifecycle_mu_);  // the controller stays while we use it
  KOLO_RETURN_IF_ERROR(timeline_.Start(path));
  if (control_.controller() != nullptr) control_.controller()->SetMarkCycles(mark_cycles);
  return Status::Ok();
}

Status RuntimeImpl::StopTimeline() {
  MutexLock lock(&lifecycle_mu_);
  if (!loop_) return timeline_.Stop();
  // Detached on the background thread, between responses: an op whose blocking call just
  // returned has run its callback, but the end of its span may not be recorded yet. The file
  // is then flushed and closed here, never on the background thread.
  std::shared_ptr<TimelineWriter> writer;
  Status ran = loop_->RunOnLoop([&] { writer = timeline_.Detach(); });
  if (!ran.ok()) return ran.WithContext("stop_timeline()");
  if (writer == nullptr) return Status::Ok();
  writer->Close();
  return writer->status().WithContext("stop_timeline");
}

Status RuntimeImpl::AbortJob(const std::string& reason) {
  if (reason.empty()) return InvalidArgument("abort_job() needs a reason");
  MutexLock lock(&lifecycle_mu_);
  // A loop that has ended (shut down, or aborted and stopped) has nothing left to fail.
  if (loop_) loop_->AbortJob(Aborted(reason));
  return Status::Ok();
}

Status RuntimeImpl::Shutdown() {
  if (BackgroundLoop::IsBackgroundThread()) {
    return FailedPrecondition(
        "shutdown() was called from a kolo callback; call it from your own thread");
  }
  MutexLock lock(&lifecycle_mu_);
  if (shut_down_) return Status::Ok();
  shut_down_ = true;
  Status status = loop_ ? loop_->Stop() : Status::Ok();
  Teardown();
  return status;
}

void RuntimeImpl::Teardown() {
  // After a job-wide Shutdown every worker closes its stream as soon as it has read it, and
  // rank 0's server waits for that (bounded by the deadline) before cancelling what is left.
  // Otherwise (an abort, or leaving without the others) it only flushes what is queued.
  const bool job_done = control_.job_done();
  SteadyTime::time_point deadline =
      transport::AddSeconds(SteadyTime::now(), job_done ? std::min(options_.timeout_seconds, 10.0)
                                                        : std::min(options_.timeout_seconds, 1.0));
  queue_.Close(ShutdownError("kolo is shut down; no new ops are accepted"));
  if (loop_) loop_->Stop().IgnoreError();  // Shutdown() already returned its status
  control_.Close(deadline);
  loop_.reset();
  planes_.StopP2p();  // before the timeline it records into stops
  planes_.DropRoundLane();
  // After the loop and the controller stopped recording: flush and close the file.
  Status closed = timeline_.Stop();
  if (!closed.ok()) logger_->warn("timeline: {}", closed.message());
  if (gpu_) gpu_->Stop();  // waits for its device work; uses the CPU executor and the mesh
  planes_.DropExecutors();
  control_.DropChannel();
  planes_.Reset();
  control_.Reset();
}

}  // namespace kolo
