// kolo::Runtime: the public face of one rank's RuntimeImpl.

#include <atomic>
#include <chrono>

#include "core/group_validation.h"
#include "core/loop/background_loop.h"
#include "core/mutex.h"
#include "core/op_validation.h"
#include "core/process_sets.h"
#include "core/tensor_queue.h"
#include "kolo/kolo.h"
#include "runtime/elastic_join.h"
#include "runtime/handle_state.h"
#include "runtime/runtime_impl.h"

namespace kolo {

Runtime::Runtime(std::unique_ptr<RuntimeImpl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

namespace {

// A blocking call's name for its error, built only when there is one.
auto Plain(const char* op) {
  return [op] { return std::string(op); };
}
auto Named(const char* op, const std::string& name) {
  return [op, &name] { return std::string(op) + " '" + name + "'"; };
}

}  // namespace

template <typename What, typename Enqueue>
Status Runtime::Blocking(const What& what, const Enqueue& enqueue) {
  // The wait ends when the op does: every failure path (mismatch, lost peer, data-plane
  // deadline, shutdown, a stall abort) completes the callback within configured deadlines.
  if (BackgroundLoop::IsBackgroundThread()) {
    return FailedPrecondition(what() +
                              ": the blocking form was called from a kolo callback, where it "
                              "would wait on itself; use the _async form");
  }
  // On this stack: the callback runs at most once, and only if the enqueue succeeded (kolo.h's
  // callback contract), and this call returns only after it released `mu`, its last touch.
  struct Waiter {
    Mutex mu;
    CondVar cv;  // with mu: done was set
    bool done KOLO_GUARDED_BY(mu) = false;
    std::atomic<bool> finished{false};  // done, for the spin before the sleep
    Status status KOLO_GUARDED_BY(mu);
  } waiter;
  {
    TensorQueue::QuietScope quiet;  // DriveOrSpin wakes the loop, unless it runs the op here
    KOLO_RETURN_IF_ERROR(enqueue([w = &waiter](const Status& s) {
      MutexLock lock(&w->mu);
      w->status = s;
      w->done = true;
      w->finished.store(true, std::memory_order_release);
      w->cv.NotifyAll();
    }));
  }
  // A small op often completes within a wake-up's time: run it here when the background
  // thread is idle, or watch for it, before sleeping.
  impl_->DriveOrSpin([&] { return waiter.finished.load(std::memory_order_acquire); });
  MutexLock lock(&waiter.mu);
  waiter.cv.Wait(&waiter.mu, [&]() KOLO_REQUIRES(waiter.mu) { return waiter.done; });
  return waiter.status;
}

namespace {

// RuntimeImpl::Create, after kolorun's elastic driver assigned the generation in an elastic
// job (a new generation at every init(); one whose start fails for a lost member is followed
// by the next, until KOLO_ELASTIC_TIMEOUT_SECONDS).
StatusOr<std::unique_ptr<RuntimeImpl>> CreateImpl(const Options& given, Options* options) {
  if (given.elastic_rendezvous.empty()) return RuntimeImpl::Create(given);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(given.elastic_timeout_seconds));
  for (;;) {
    KOLO_ASSIGN_OR_RETURN(*options, internal::JoinElasticGeneration(given));
    // A start that failed for a member lost meanwhile asks for the next generation; an error
    // that would repeat (a bad variable) is returned.
    StatusOr<std::unique_ptr<RuntimeImpl>> impl = RuntimeImpl::Create(*options);
    if (impl.ok() || !internal::LostMember(impl.status()) ||
        std::chrono::steady_clock::now() >= deadline) {
      return impl;
    }
  }
}

}  // namespace

StatusOr<std::unique_ptr<Runtime>> Runtime::Create(const Options& given) {
  Options options = given;
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<RuntimeImpl> impl, CreateImpl(given, &options));
  std::unique_ptr<Runtime> runtime(new Runtime(std::move(impl)));
  // KOLO_PROCESS_SETS: every rank adds them first, in order, so they get ids 1, 2, ...; ranks
  // whose lists differ all fail here with the controller's mismatch message.
  KOLO_ASSIGN_OR_RETURN(std::vector<std::vector<int>> sets,
                        ParseProcessSets(options.process_sets, options.size));
  std::string agreed;  // the sets as every rank must have them, compared with each add
  for (const std::vector<int>& set : sets) {
    agreed += agreed.empty() ? "" : ";";
    for (size_t r = 0; r < set.size(); ++r) agreed += (r ? "," : "") + std::to_string(set[r]);
  }
  for (size_t i = 0; i < sets.size(); ++i) {
    int id = 0;
    Status failed = runtime->Blocking(Plain("KOLO_PROCESS_SETS"), [&](Callback done) {
      return runtime->impl_->AddProcessSetAsync(sets[i], &id, std::move(done), agreed);
    });
    if (failed.ok() && id != static_cast<int>(i) + 1) {
      failed = Internal("process set " + std::to_string(i + 1) + " got id " + std::to_string(id));
    }
    if (!failed.ok()) {
      runtime->Shutdown().IgnoreError();  // the error below is what init() reports
      return failed.WithContext("KOLO_PROCESS_SETS");
    }
  }
  return runtime;
}

Status Runtime::Shutdown() {
  return impl_->Shutdown();
}

Status Runtime::AbortJob(const std::string& reason) {
  return impl_->AbortJob(reason);
}

Status Runtime::StartTimeline(const std::string& path) {
  return impl_->StartTimeline(path, impl_->options().timeline_mark_cycles);
}

Status Runtime::StartTimeline(const std::string& path, bool mark_cycles) {
  return impl_->StartTimeline(path, mark_cycles);
}

Status Runtime::StopTimeline() {
  return impl_->StopTimeline();
}

int Runtime::rank() const {
  return impl_->options().rank;
}
int Runtime::size() const {
  return impl_->options().size;
}
int Runtime::local_rank() const {
  return impl_->topology().local_rank;
}
int Runtime::local_size() const {
  return impl_->topology().local_size;
}
int Runtime::cross_rank() const {
  return impl_->topology().cross_rank;
}
int Runtime::cross_size() const {
  return impl_->topology().cross_size;
}

StatusOr<int> Runtime::AddProcessSet(const std::vector<int>& ranks) {
  int id = 0;  // set before the callback runs, which Blocking waits for
  KOLO_RETURN_IF_ERROR(Blocking(Plain("add_process_set"), [&](Callback done) {
    return AddProcessSetAsync(ranks, &id, std::move(done));
  }));
  return id;
}

Status Runtime::AddProcessSetAsync(const std::vector<int>& ranks, int* id, Callback callback) {
  return impl_->AddProcessSetAsync(ranks, id, std::move(callback));
}

Status Runtime::RemoveProcessSet(int process_set) {
  auto what = [process_set] { return "remove_process_set(" + std::to_string(process_set) + ")"; };
  return Blocking(
      what, [&](Callback done) { return RemoveProcessSetAsync(process_set, std::move(done)); });
}

Status Runtime::RemoveProcessSetAsync(int process_set, Callback callback) {
  return impl_->RemoveProcessSetAsync(process_set, std::move(callback));
}

ProcessSetScope::ProcessSetScope(int process_set)
    : previous_(internal::SetCurrentProcessSet(process_set)) {}

ProcessSetScope::~ProcessSetScope() {
  internal::SetCurrentProcessSet(previous_);
}

int Runtime::ProcessSetRank(int process_set) const {
  StatusOr<SetMembership> m = impl_->process_sets().Resolve(process_set, "process_set_rank");
  return m.ok() ? m->rank : -1;
}

int Runtime::ProcessSetSize(int process_set) const {
  std::vector<int> ranks = impl_->process_sets().Members(process_set);
  return ranks.empty() ? -1 : static_cast<int>(ranks.size());
}

std::vector<int> Runtime::ProcessSetRanks(int process_set) const {
  return impl_->process_sets().Members(process_set);
}

Status Runtime::AllreduceAsync(const std::string& name, const TensorView& input,
                               const TensorView& output, const AllreduceOptions& options,
                               Callback callback) {
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta, ValidateAllreduce(name, input, output, options));
  return impl_->Enqueue(std::move(meta), input, output, std::move(callback));
}

Status Runtime::Allreduce(const std::string& name, const TensorView& input,
                          const TensorView& output, const AllreduceOptions& options) {
  return Blocking(Named("allreduce", name), [&](Callback done) {
    return AllreduceAsync(name, input, output, options, std::move(done));
  });
}

Status Runtime::AllgatherAsync(const std::string& name, const TensorView& input, Allocator allocate,
                               Callback callback) {
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta, ValidateAllgather(name, input, allocate));
  TensorView output = input;  // data and shape are filled in once negotiation decided them
  output.data = nullptr;
  return impl_->Enqueue(std::move(meta), input, output, std::move(callback), std::move(allocate));
}

Status Runtime::Allgather(const std::string& name, const TensorView& input, Allocator allocate) {
  return Blocking(Named("allgather", name), [&](Callback done) {
    return AllgatherAsync(name, input, allocate, std::move(done));
  });
}

Status Runtime::GroupedAllreduceAsync(const std::vector<std::string>& names,
                                      const std::vector<TensorView>& inputs,
                                      const std::vector<TensorView>& outputs,
                                      const AllreduceOptions& options, Callback callback) {
  KOLO_ASSIGN_OR_RETURN(std::vector<TensorMeta> metas,
                        ValidateGroupedAllreduce(names, inputs, outputs, options));
  return impl_->EnqueueGroup(std::move(metas), inputs, outputs, std::move(callback));
}

Status Runtime::GroupedAllreduce(const std::vector<std::string>& names,
                                 const std::vector<TensorView>& inputs,
                                 const std::vector<TensorView>& outputs,
                                 const AllreduceOptions& options) {
  return Blocking(Plain("grouped allreduce"), [&](Callback done) {
    return GroupedAllreduceAsync(names, inputs, outputs, options, std::move(done));
  });
}

Status Runtime::GroupedAllgatherAsync(const std::vector<std::string>& names,
                                      const std::vector<TensorView>& inputs,
                                      std::vector<Allocator> allocators, Callback callback) {
  KOLO_ASSIGN_OR_RETURN(std::vector<TensorMeta> metas,
                        ValidateGroupedAllgather(names, inputs, allocators));
  std::vector<TensorView> outputs = inputs;  // filled in once negotiation decided them
  for (TensorView& output : outputs) output.data = nullptr;
  return impl_->EnqueueGroup(std::move(metas), inputs, outputs, std::move(callback),
                             std::move(allocators));
}

Status Runtime::GroupedAllgather(const std::vector<std::string>& names,
                                 const std::vector<TensorView>& inputs,
                                 std::vector<Allocator> allocators) {
  return Blocking(Plain("grouped allgather"), [&](Callback done) {
    return GroupedAllgatherAsync(names, inputs, std::move(allocators), std::move(done));
  });
}

Status Runtime::GroupedReducescatterAsync(const std::vector<std::string>& names,
                                          const std::vector<TensorView>& inputs,
                                          const std::vector<TensorView>& outputs,
                                          const AllreduceOptions& options, Callback callback) {
  KOLO_ASSIGN_OR_RETURN(SetMembership set, impl_->CurrentMembership("grouped reducescatter"));
  KOLO_ASSIGN_OR_RETURN(
      std::vector<TensorMeta> metas,
      ValidateGroupedReducescatter(names, inputs, outputs, options, set.rank, set.size));
  return impl_->EnqueueGroup(std::move(metas), inputs, outputs, std::move(callback));
}

Status Runtime::GroupedReducescatter(const std::vector<std::string>& names,
                                     const std::vector<TensorView>& inputs,
                                     const std::vector<TensorView>& outputs,
                                     const AllreduceOptions& options) {
  return Blocking(Plain("grouped reducescatter"), [&](Callback done) {
    return GroupedReducescatterAsync(names, inputs, outputs, options, std::move(done));
  });
}

Status Runtime::AlltoallAsync(const std::string& name, const TensorView& input,
                              const std::vector<int64_t>& splits, Allocator allocate,
                              std::vector<int64_t>* received_splits, Callback callback) {
  KOLO_ASSIGN_OR_RETURN(SetMembership set, impl_->CurrentMembership("alltoall '" + name + "'"));
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta, ValidateAlltoall(name, input, splits, allocate, set.size));
  TensorView output = input;  // data and shape are filled in once negotiation decided them
  output.data = nullptr;
  return impl_->Enqueue(std::move(meta), input, output, std::move(callback), std::move(allocate),
                        received_splits);
}

Status Runtime::Alltoall(const std::string& name, const TensorView& input,
                         const std::vector<int64_t>& splits, Allocator allocate,
                         std::vector<int64_t>* received_splits) {
  return Blocking(Named("alltoall", name), [&](Callback done) {
    return AlltoallAsync(name, input, splits, allocate, received_splits, std::move(done));
  });
}

Status Runtime::ReducescatterAsync(const std::string& name, const TensorView& input,
                                   const TensorView& output, const AllreduceOptions& options,
                                   Callback callback) {
  KOLO_ASSIGN_OR_RETURN(SetMembership set,
                        impl_->CurrentMembership("reducescatter '" + name + "'"));
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta,
                        ValidateReducescatter(name, input, output, options, set.rank, set.size));
  return impl_->Enqueue(std::move(meta), input, output, std::move(callback));
}

Status Runtime::Reducescatter(const std::string& name, const TensorView& input,
                              const TensorView& output, const AllreduceOptions& options) {
  return Blocking(Named("reducescatter", name), [&](Callback done) {
    return ReducescatterAsync(name, input, output, options, std::move(done));
  });
}

Status Runtime::BroadcastAsync(const std::string& name, const TensorView& tensor, int root,
                               Callback callback) {
  KOLO_ASSIGN_OR_RETURN(SetMembership set, impl_->CurrentMembership("broadcast '" + name + "'"));
  KOLO_ASSIGN_OR_RETURN(int set_root, impl_->RootInSet(set, root, "broadcast '" + name + "'"));
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta, ValidateBroadcast(name, tensor, set_root, set.size));
  return impl_->Enqueue(std::move(meta), tensor, tensor, std::move(callback));
}

Status Runtime::Broadcast(const std::string& name, const TensorView& tensor, int root) {
  return Blocking(Named("broadcast", name), [&](Callback done) {
    return BroadcastAsync(name, tensor, root, std::move(done));
  });
}

Status Runtime::BroadcastAsync(const std::string& name, const TensorView& input,
                               const TensorView& output, int root, Callback callback) {
  KOLO_ASSIGN_OR_RETURN(SetMembership set, impl_->CurrentMembership("broadcast '" + name + "'"));
  KOLO_ASSIGN_OR_RETURN(int set_root, impl_->RootInSet(set, root, "broadcast '" + name + "'"));
  KOLO_ASSIGN_OR_RETURN(TensorMeta meta,
                        ValidateBroadcast(name, input, output, set_root, set.size));
  return impl_->Enqueue(std::move(meta), input, output, std::move(callback));
}

Status Runtime::Broadcast(const std::string& name, const TensorView& input,
                          const TensorView& output, int root) {
  return Blocking(Named("broadcast", name), [&](Callback done) {
    return BroadcastAsync(name, input, output, root, std::move(done));
  });
}

Status Runtime::JoinAsync(int* last_rank, Callback callback) {
  TensorView none;
  none.dtype = DataType::kUInt8;
  none.shape = {0};
  return impl_->Enqueue(BarrierMeta(kJoinName, OpType::kJoin), none, none, std::move(callback),
                        nullptr, nullptr, last_rank);
}

StatusOr<int> Runtime::Join() {
  int last = -1;  // set before the callback runs, which Blocking waits for
  KOLO_RETURN_IF_ERROR(
      Blocking(Plain("join"), [&](Callback done) { return JoinAsync(&last, std::move(done)); }));
  return last;
}

Status Runtime::BarrierAsync(Callback callback) {
  TensorView none;
  none.dtype = DataType::kUInt8;
  none.shape = {0};
  return impl_->Enqueue(BarrierMeta(kBarrierName), none, none, std::move(callback));
}

Status Runtime::Barrier() {
  return Blocking(Plain("barrier"), [&](Callback done) { return BarrierAsync(std::move(done)); });
}

StatusOr<Handle> Runtime::AllreduceAsync(const std::string& name, const TensorView& input,
                                         const TensorView& output,
                                         const AllreduceOptions& options) {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return AllreduceAsync(name, input, output, options, std::move(done)); });
}

StatusOr<Handle> Runtime::AllreduceAsyncDriven(const std::string& name, const TensorView& input,
                                               const TensorView& output,
                                               const AllreduceOptions& options) {
  // On kolo's thread (a callback) nothing can run the op but that thread: a plain enqueue.
  if (BackgroundLoop::IsBackgroundThread()) return AllreduceAsync(name, input, output, options);
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    TensorQueue::QuietScope quiet;  // DriveOrSpin wakes the loop, unless it runs the op here
    handle = AllreduceAsync(name, input, output, options);
  }
  if (!handle.ok()) return handle;
  const Handle& op = *handle;
  impl_->DriveOrSpin([&op] { return op.Poll(); });
  return handle;
}

StatusOr<Handle> Runtime::AllgatherAsync(const std::string& name, const TensorView& input,
                                         Allocator allocate) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return AllgatherAsync(name, input, std::move(allocate), std::move(done));
  });
}

StatusOr<Handle> Runtime::GroupedAllreduceAsync(const std::vector<std::string>& names,
                                                const std::vector<TensorView>& inputs,
                                                const std::vector<TensorView>& outputs,
                                                const AllreduceOptions& options) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return GroupedAllreduceAsync(names, inputs, outputs, options, std::move(done));
  });
}

StatusOr<Handle> Runtime::GroupedAllgatherAsync(const std::vector<std::string>& names,
                                                const std::vector<TensorView>& inputs,
                                                std::vector<Allocator> allocators) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return GroupedAllgatherAsync(names, inputs, std::move(allocators), std::move(done));
  });
}

StatusOr<Handle> Runtime::GroupedReducescatterAsync(const std::vector<std::string>& names,
                                                    const std::vector<TensorView>& inputs,
                                                    const std::vector<TensorView>& outputs,
                                                    const AllreduceOptions& options) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return GroupedReducescatterAsync(names, inputs, outputs, options, std::move(done));
  });
}

StatusOr<Handle> Runtime::AlltoallAsync(const std::string& name, const TensorView& input,
                                        const std::vector<int64_t>& splits, Allocator allocate,
                                        std::vector<int64_t>* received_splits) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return AlltoallAsync(name, input, splits, std::move(allocate), received_splits,
                         std::move(done));
  });
}

StatusOr<Handle> Runtime::ReducescatterAsync(const std::string& name, const TensorView& input,
                                             const TensorView& output,
                                             const AllreduceOptions& options) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return ReducescatterAsync(name, input, output, options, std::move(done));
  });
}

StatusOr<Handle> Runtime::BroadcastAsync(const std::string& name, const TensorView& tensor,
                                         int root) {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return BroadcastAsync(name, tensor, root, std::move(done)); });
}

StatusOr<Handle> Runtime::BroadcastAsync(const std::string& name, const TensorView& input,
                                         const TensorView& output, int root) {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return BroadcastAsync(name, input, output, root, std::move(done)); });
}

StatusOr<Handle> Runtime::JoinAsync(int* last_rank) {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return JoinAsync(last_rank, std::move(done)); });
}

StatusOr<Handle> Runtime::BarrierAsync() {
  return internal::HandleAccess::Submit(
      [&](Callback done) { return BarrierAsync(std::move(done)); });
}

}  // namespace kolo
