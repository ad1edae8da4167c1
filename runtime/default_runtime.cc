// The process-wide default runtime behind kolo's free functions.
//
// Threading: init() and shutdown() serialise on a mutex. Ops take a shared reference to the
// current runtime under that mutex for the moment of the lookup only, so an op racing with
// shutdown() finds either the runtime (and then fails with SHUTDOWN once its queue closes) or
// none, never a destroyed one.
#include <atomic>
#include <memory>
#include <optional>
#include <utility>

#include "core/loop/background_loop.h"
#include "core/mutex.h"
#include "core/tensor_queue.h"
#include "kolo/kolo.h"
#include "runtime/handle_state.h"
#include "runtime/raw_data_plane.h"
#include "runtime/runtime_access.h"
#include "runtime/runtime_impl.h"
#include "runtime/version_check.h"

namespace kolo {
namespace {

struct DefaultRuntime {
  Mutex lifecycle_mu;                                  // held through init() and shutdown()
  Mutex pointer_mu KOLO_ACQUIRED_AFTER(lifecycle_mu);  // held only to read or swap `runtime`
  std::shared_ptr<Runtime> runtime KOLO_GUARDED_BY(pointer_mu);
};

DefaultRuntime& Default() {  // a function-local static: built on first use, in any order
  static DefaultRuntime state;
  return state;
}

std::shared_ptr<Runtime> Current() {
  DefaultRuntime& state = Default();
  MutexLock lock(&state.pointer_mu);
  return state.runtime;
}

// Set by shutdown(), cleared by init(): an op after shutdown() is told so, not that init()
// was never called.
std::atomic<bool>& WasShutDown() {
  static std::atomic<bool> flag{false};
  return flag;
}

Status NotInitialized() {
  if (WasShutDown()) {
    return FailedPrecondition("kolo was shut down: call kolo::init() again to start a new job");
  }
  return FailedPrecondition("kolo is not initialized: call kolo::init() first");
}

// Calls `fn` on the default runtime, or fails with NotInitialized when there is none.
template <typename Fn>
auto OnDefault(Fn&& fn) -> decltype(fn(std::declval<Runtime&>())) {
  std::shared_ptr<Runtime> rt = Current();
  if (!rt) return NotInitialized();
  return fn(*rt);
}

Status RefuseInCallback(const char* what) {
  return FailedPrecondition(std::string(what) +
                            " was called from a kolo callback; call it from your own thread");
}

}  // namespace

namespace internal {

std::shared_ptr<Runtime> CurrentDefaultRuntime() {
  return Current();
}
Status DefaultRuntimeMissing() {
  return NotInitialized();
}

}  // namespace internal

namespace {

// HandleDriver (runtime/handle_state.h) for the handles of the default runtime's ops: drives
// the op on the waiting thread, or polls it, while a runtime is up; the shared_ptr keeps it
// alive meanwhile.
bool DriveDefault(const std::function<bool()>& done) {
  std::shared_ptr<Runtime> rt = Current();
  if (!rt) return done();
  return internal::RuntimeAccess::Impl(*rt).DriveOrSpin(done);
}

}  // namespace

Status init_for_version(int header_version) {
  KOLO_RETURN_IF_ERROR(CheckHeaderVersion(header_version));
  StatusOr<Options> options = Options::FromEnvironment();
  if (!options.ok()) return options.status().WithContext("kolo::init()");
  return init_for_version(header_version, *options);
}

Status init_for_version(int header_version, const Options& options) {
  KOLO_RETURN_IF_ERROR(CheckHeaderVersion(header_version));
  if (BackgroundLoop::IsBackgroundThread()) return RefuseInCallback("init()");
  DefaultRuntime& state = Default();
  MutexLock lifecycle(&state.lifecycle_mu);
  if (Current()) return FailedPrecondition("kolo is already initialized");
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(options));
  internal::SetHandleDriver(&DriveDefault);
  MutexLock lock(&state.pointer_mu);
  state.runtime = std::move(runtime);
  WasShutDown() = false;
  return Status::Ok();
}

Status shutdown() {
  if (BackgroundLoop::IsBackgroundThread()) return RefuseInCallback("shutdown()");
  DefaultRuntime& state = Default();
  MutexLock lifecycle(&state.lifecycle_mu);
  std::shared_ptr<Runtime> runtime;
  {
    MutexLock lock(&state.pointer_mu);
    runtime.swap(state.runtime);
  }
  if (!runtime) return Status::Ok();
  WasShutDown() = true;
  return runtime->Shutdown();
}

bool is_initialized() {
  return Current() != nullptr;
}

int rank() {
  std::shared_ptr<Runtime> rt = Current();
  return rt ? rt->rank() : -1;
}
int size() {
  std::shared_ptr<Runtime> rt = Current();
  return rt ? rt->size() : -1;
}
int local_rank() {
  std::shared_ptr<Runtime> rt = Current();
  return rt ? rt->local_rank() : -1;
}
int local_size() {
  std::shared_ptr<Runtime> rt = Current();
  return rt ? rt->local_size() : -1;
}
int cross_rank() {
  std::shared_ptr<Runtime> rt = Current();
  return rt ? rt->cross_rank() : -1;
}
int cross_size() {
  std::shared_ptr<Runtime> rt = Current();
  return rt ? rt->cross_size() : -1;
}

Status allreduce_async(const std::string& name, const TensorView& input, const TensorView& output,
                       const AllreduceOptions& options, Callback callback) {
  return OnDefault([&](Runtime& rt) {
    return rt.AllreduceAsync(name, input, output, options, std::move(callback));
  });
}

Status allreduce(const std::string& name, const TensorView& input, const TensorView& output,
                 const AllreduceOptions& options) {
  return OnDefault([&](Runtime& rt) { return rt.Allreduce(name, input, output, options); });
}

Status allgather_async(const std::string& name, const TensorView& input, Allocator allocate,
                       Callback callback) {
  return OnDefault([&](Runtime& rt) {
    return rt.AllgatherAsync(name, input, std::move(allocate), std::move(callback));
  });
}

Status allgather(const std::string& name, const TensorView& input, Allocator allocate) {
  return OnDefault([&](Runtime& rt) { return rt.Allgather(name, input, std::move(allocate)); });
}

Status grouped_allreduce_async(const std::vector<std::string>& names,
                               const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs,
                               const AllreduceOptions& options, Callback callback) {
  return OnDefault([&](Runtime& rt) {
    return rt.GroupedAllreduceAsync(names, inputs, outputs, options, std::move(callback));
  });
}

Status grouped_allreduce(const std::vector<std::string>& names,
                         const std::vector<TensorView>& inputs,
                         const std::vector<TensorView>& outputs, const AllreduceOptions& options) {
  return OnDefault(
      [&](Runtime& rt) { return rt.GroupedAllreduce(names, inputs, outputs, options); });
}

Status grouped_allgather_async(const std::vector<std::string>& names,
                               const std::vector<TensorView>& inputs,
                               std::vector<Allocator> allocators, Callback callback) {
  return OnDefault([&](Runtime& rt) {
    return rt.GroupedAllgatherAsync(names, inputs, std::move(allocators), std::move(callback));
  });
}

Status grouped_allgather(const std::vector<std::string>& names,
                         const std::vector<TensorView>& inputs, std::vector<Allocator> allocators) {
  return OnDefault(
      [&](Runtime& rt) { return rt.GroupedAllgather(names, inputs, std::move(allocators)); });
}

Status grouped_reducescatter_async(const std::vector<std::string>& names,
                                   const std::vector<TensorView>& inputs,
                                   const std::vector<TensorView>& outputs,
                                   const AllreduceOptions& options, Callback callback) {
  return OnDefault([&](Runtime& rt) {
    return rt.GroupedReducescatterAsync(names, inputs, outputs, options, std::move(callback));
  });
}

Status grouped_reducescatter(const std::vector<std::string>& names,
                             const std::vector<TensorView>& inputs,
                             const std::vector<TensorView>& outputs,
                             const AllreduceOptions& options) {
  return OnDefault(
      [&](Runtime& rt) { return rt.GroupedReducescatter(names, inputs, outputs, options); });
}

Status alltoall_async(const std::string& name, const TensorView& input,
                      const std::vector<int64_t>& splits, Allocator allocate,
                      std::vector<int64_t>* received_splits, Callback callback) {
  return OnDefault([&](Runtime& rt) {
    return rt.AlltoallAsync(name, input, splits, std::move(allocate), received_splits,
                            std::move(callback));
  });
}

Status alltoall(const std::string& name, const TensorView& input,
                const std::vector<int64_t>& splits, Allocator allocate,
                std::vector<int64_t>* received_splits) {
  return OnDefault([&](Runtime& rt) {
    return rt.Alltoall(name, input, splits, std::move(allocate), received_splits);
  });
}

Status reducescatter_async(const std::string& name, const TensorView& input,
                           const TensorView& output, const AllreduceOptions& options,
                           Callback callback) {
  return OnDefault([&](Runtime& rt) {
    return rt.ReducescatterAsync(name, input, output, options, std::move(callback));
  });
}

Status reducescatter(const std::string& name, const TensorView& input, const TensorView& output,
                     const AllreduceOptions& options) {
  return OnDefault([&](Runtime& rt) { return rt.Reducescatter(name, input, output, options); });
}

Status broadcast_async(const std::string& name, const TensorView& tensor, int root,
                       Callback callback) {
  return OnDefault(
      [&](Runtime& rt) { return rt.BroadcastAsync(name, tensor, root, std::move(callback)); });
}

Status broadcast(const std::string& name, const TensorView& tensor, int root) {
  return OnDefault([&](Runtime& rt) { return rt.Broadcast(name, tensor, root); });
}

Status broadcast_async(const std::string& name, const TensorView& input, const TensorView& output,
                       int root, Callback callback) {
  return OnDefault([&](Runtime& rt) {
    return rt.BroadcastAsync(name, input, output, root, std::move(callback));
  });
}

Status broadcast(const std::string& name, const TensorView& input, const TensorView& output,
                 int root) {
  return OnDefault([&](Runtime& rt) { return rt.Broadcast(name, input, output, root); });
}

Status join_async(int* last_rank, Callback callback) {
  return OnDefault([&](Runtime& rt) { return rt.JoinAsync(last_rank, std::move(callback)); });
}

StatusOr<int> join() {
  return OnDefault([&](Runtime& rt) { return rt.Join(); });
}

Status barrier_async(Callback callback) {
  return OnDefault([&](Runtime& rt) { return rt.BarrierAsync(std::move(callback)); });
}

Status barrier() {
  return OnDefault([&](Runtime& rt) { return rt.Barrier(); });
}

StatusOr<Handle> allreduce_async(const std::string& name, const TensorView& input,
                                 const TensorView& output, const AllreduceOptions& options) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return allreduce_async(name, input, output, options, std::move(done));
  });
}

StatusOr<Handle> allreduce_async_driven(const std::string& name, const TensorView& input,
                                        const TensorView& output, const AllreduceOptions& options) {
  return OnDefault(
      [&](Runtime& rt) { return rt.AllreduceAsyncDriven(name, input, output, options); });
}

StatusOr<Handle> enqueue_tracked(const std::function<Status(Callback)>& enqueue, Callback callback,
                                 bool drive) {
  std::shared_ptr<Runtime> rt = Current();
  if (!rt) return NotInitialized();
  drive = drive && !BackgroundLoop::IsBackgroundThread();  // there only kolo's thread runs it
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    std::optional<TensorQueue::QuietScope> quiet;  // DriveOrSpin wakes the loop if it must
    if (drive) quiet.emplace();
    handle = internal::HandleAccess::Submit([&](Callback done) {
      return enqueue([callback = std::move(callback), done = std::move(done)](const Status& s) {
        if (callback) callback(s);
        done(s);
      });
    });
  }
  if (drive && handle.ok()) {
    const Handle& op = *handle;
    internal::RuntimeAccess::Impl(*rt).DriveOrSpin([&op] { return op.Poll(); });
  }
  return handle;
}

StatusOr<Handle> allgather_async(const std::string& name, const TensorView& input,
                                 Allocator allocate) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return allgather_async(name, input, std::move(allocate), std::move(done));
  });
}

StatusOr<Handle> grouped_allreduce_async(const std::vector<std::string>& names,
                                         const std::vector<TensorView>& inputs,
                                         const std::vector<TensorView>& outputs,
                                         const AllreduceOptions& options) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return grouped_allreduce_async(names, inputs, outputs, options, std::move(done));
  });
}

StatusOr<Handle> grouped_allgather_async(const std::vector<std::string>& names,
                                         const std::vector<TensorView>& inputs,
                                         std::vector<Allocator> allocators) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return grouped_allgather_async(names, inputs, std::move(allocators), std::move(done));
  });
}

StatusOr<Handle> grouped_reducescatter_async(const std::vector<std::string>& names,
                                             const std::vector<TensorView>& inputs,
                                             const std::vector<TensorView>& outputs,
                                             const AllreduceOptions& options) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return grouped_reducescatter_async(names, inputs, outputs, options, std::move(done));
  });
}

StatusOr<Handle> alltoall_async(const std::string& name, const TensorView& input,
                                const std::vector<int64_t>& splits, Allocator allocate,
                                std::vector<int64_t>* received_splits) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return alltoall_async(name, input, splits, std::move(allocate), received_splits,
                          std::move(done));
  });
}

StatusOr<Handle> reducescatter_async(const std::string& name, const TensorView& input,
                                     const TensorView& output, const AllreduceOptions& options) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return reducescatter_async(name, input, output, options, std::move(done));
  });
}

StatusOr<Handle> broadcast_async(const std::string& name, const TensorView& tensor, int root) {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return broadcast_async(name, tensor, root, std::move(done)); });
}

StatusOr<Handle> broadcast_async(const std::string& name, const TensorView& input,
                                 const TensorView& output, int root) {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return broadcast_async(name, input, output, root, std::move(done)); });
}

StatusOr<Handle> join_async(int* last_rank) {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return join_async(last_rank, std::move(done)); });
}

StatusOr<Handle> barrier_async() {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return barrier_async(std::move(done)); });
}

StatusOr<int> add_process_set(const std::vector<int>& ranks) {
  int id = -1;
  KOLO_RETURN_IF_ERROR(OnDefault([&](Runtime& rt) {
    StatusOr<int> added = rt.AddProcessSet(ranks);
    if (added.ok()) id = *added;
    return added.status();
  }));
  return id;
}

StatusOr<Handle> add_process_set_async(const std::vector<int>& ranks, int* id) {
  std::shared_ptr<Runtime> rt = Current();
  if (!rt) return NotInitialized();
  return internal::HandleAccess::Submit(
      [&](Callback done) { return rt->AddProcessSetAsync(ranks, id, std::move(done)); });
}

Status remove_process_set(int process_set) {
  return OnDefault([&](Runtime& rt) { return rt.RemoveProcessSet(process_set); });
}

StatusOr<Handle> remove_process_set_async(int process_set) {
  std::shared_ptr<Runtime> rt = Current();
  if (!rt) return NotInitialized();
  return internal::HandleAccess::Submit(
      [&](Callback done) { return rt->RemoveProcessSetAsync(process_set, std::move(done)); });
}

int process_set_rank(int process_set) {
  int rank = -1;
  OnDefault([&](Runtime& rt) {
    rank = rt.ProcessSetRank(process_set);
    return Status::Ok();
  }).IgnoreError();
  return rank;
}

int process_set_size(int process_set) {
  int size = -1;
  OnDefault([&](Runtime& rt) {
    size = rt.ProcessSetSize(process_set);
    return Status::Ok();
  }).IgnoreError();
  return size;
}

std::vector<int> process_set_ranks(int process_set) {
  std::vector<int> ranks;
  OnDefault([&](Runtime& rt) {
    ranks = rt.ProcessSetRanks(process_set);
    return Status::Ok();
  }).IgnoreError();
  return ranks;
}

Status abort_job(const std::string& reason) {
  return OnDefault([&](Runtime& rt) { return rt.AbortJob(reason); });
}

Status start_timeline(const std::string& path) {
  return OnDefault([&](Runtime& rt) { return rt.StartTimeline(path); });
}

Status start_timeline(const std::string& path, bool mark_cycles) {
  return OnDefault([&](Runtime& rt) { return rt.StartTimeline(path, mark_cycles); });
}

Status stop_timeline() {
  return OnDefault([&](Runtime& rt) { return rt.StopTimeline(); });
}

namespace internal {

Status RawAllreduce(void* data, int64_t count, DataType dtype) {
  if (BackgroundLoop::IsBackgroundThread()) return RefuseInCallback("RawAllreduce");
  return OnDefault(
      [&](Runtime& rt) { return RuntimeAccess::Impl(rt).RawAllreduce(data, count, dtype); });
}

StatusOr<std::string> GpuOperationsInUse() {
  return OnDefault(
      [](Runtime& rt) -> StatusOr<std::string> { return RuntimeAccess::Impl(rt).gpu_path(); });
}

}  // namespace internal
}  // namespace kolo
