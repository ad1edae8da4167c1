// KoloBackend: the group's life, Issue (naming and handing ops to kolo), the collectives that
// keep the caller's tensors in place (allreduce, reduce, broadcast, barrier), and the
// point-to-point ops handed to PeerOps.
#include "python/csrc/c10d/kolo_backend.h"

#include <torch/extension.h>

#include <algorithm>
#include <optional>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <utility>

#include "kolo/p2p.h"
#include "python/csrc/tensor_view.h"

namespace kolo::torch_ext {
namespace c10d_args {

void Fail(const std::string& message) {
  throw c10::Error(c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                   "kolo: " + message);
}

at::Tensor Single(const std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1) {
    Fail(std::string(op) + " takes exactly one tensor per call, got " +
         std::to_string(tensors.size()) + " (kolo has one device per process)");
  }
  return tensors[0];
}

TensorView View(const at::Tensor& tensor, const char* op) {
  std::string error;
  std::optional<TensorView> view = ToView(tensor, op, &error);
  if (!view) Fail(error);
  return *view;
}

AllreduceOptions Reduction(const c10d::ReduceOp& reduce_op, const at::Tensor& tensor,
                           const char* op) {
  AllreduceOptions options;
  switch (reduce_op.op_) {
    case c10d::ReduceOp::SUM:
      options.op = ReduceOp::kSum;
      return options;
    case c10d::ReduceOp::AVG:
      options.op = ReduceOp::kAverage;
      return options;
    case c10d::ReduceOp::PRODUCT:
      options.op = ReduceOp::kProduct;
      return options;
    case c10d::ReduceOp::MIN:
      options.op = ReduceOp::kMin;
      return options;
    case c10d::ReduceOp::MAX:
      options.op = ReduceOp::kMax;
      return options;
    case c10d::ReduceOp::PREMUL_SUM: {
      // NCCL's "multiply by a factor, then sum" is kolo's prescale factor.
      auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(reduce_op.supplement_.get());
      if (supplement == nullptr) Fail(std::string(op) + ": PREMUL_SUM without its factor");
      options.op = ReduceOp::kSum;
      options.prescale = supplement->tensor_factor.defined()
                             ? supplement->tensor_factor.item<double>()
                             : supplement->double_factor;
      return options;
    }
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
      if (tensor.scalar_type() == at::kBool) {  // and / or of bools are kolo's min / max
        options.op = reduce_op.op_ == c10d::ReduceOp::BAND ? ReduceOp::kMin : ReduceOp::kMax;
        return options;
      }
      break;
    default:
      break;
  }
  Fail(std::string(op) + ": kolo has no " +
       (reduce_op.op_ == c10d::ReduceOp::BXOR   ? "BXOR"
        : reduce_op.op_ == c10d::ReduceOp::BAND ? "BAND"
        : reduce_op.op_ == c10d::ReduceOp::BOR  ? "BOR"
                                                : "such") +
       " reduction" +
       (reduce_op.op_ == c10d::ReduceOp::BAND || reduce_op.op_ == c10d::ReduceOp::BOR
            ? " except on bool tensors"
            : "") +
       "; it has SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM");
}

Signature& Begin(Signature* signature, OpType op) {
  return signature->Add(static_cast<int64_t>(op));
}

void AddView(Signature* signature, const TensorView& view, bool rows_may_differ) {
  signature->Add(static_cast<int64_t>(view.dtype)).Add(int64_t{view.device.is_cpu() ? 0 : 1});
  if (!rows_may_differ || view.shape.empty()) {
    signature->Add(view.shape);
  } else {
    signature->Add(std::vector<int64_t>(view.shape.begin() + 1, view.shape.end()));
  }
}

Contiguous::Contiguous(const at::Tensor& tensor)
    : original(tensor), buffer(tensor.is_contiguous() ? tensor : tensor.contiguous()) {}

Status Contiguous::CopyBack() const {
  if (!buffer.is_same(original)) original.copy_(buffer);
  return Status::Ok();
}

std::function<Status()> CopyBackAll(std::vector<std::shared_ptr<Contiguous>> ios) {
  return [ios = std::move(ios)] {
    for (const auto& io : ios) KOLO_RETURN_IF_ERROR(io->CopyBack());
    return Status::Ok();
  };
}

std::vector<std::string> MemberNames(const std::string& name, size_t count) {
  std::vector<std::string> names;
  names.reserve(count);
  for (size_t i = 0; i < count; ++i) names.push_back(name + "#" + std::to_string(i));
  return names;
}

void CheckRoot(int64_t root, int size, const char* op) {
  if (root < 0 || root >= size) {
    Fail(std::string(op) + ": root rank " + std::to_string(root) + " is not in the group of " +
         std::to_string(size));
  }
}

}  // namespace c10d_args

using namespace c10d_args;  // NOLINT: this file's helpers

namespace {

// An op as errors name it: "allreduce #3 of process group '0'".
std::string OpInGroup(const char* op, uint64_t sequence, const std::string& group_name) {
  return std::string(op) + " #" + std::to_string(sequence) + " of process group '" + group_name +
         "'";
}

// The group as its point-to-point ops see it: each group rank's rank in the kolo process set.
PeerOps::Group PeerGroupOf(const KoloBackend::Config& config) {
  PeerOps::Group group;
  group.rank = config.rank;
  group.size = config.size;
  group.process_set = config.process_set;
  group.name = config.group_name;
  const std::vector<int> members = kolo::process_set_ranks(config.process_set);
  for (int job_rank : config.ranks) {
    const auto found = std::find(members.begin(), members.end(), job_rank);
    group.set_ranks.push_back(
        found == members.end() ? -1 : static_cast<int>(std::distance(members.begin(), found)));
  }
  return group;
}

// Waits (at most `timeout`) for the op in flight under `name` in `in_flight`, if any, before
// the next of that name (`what`) goes to kolo: null once it is done, else what to throw (past
// the timeout the job ends, EndJobAfterTimeout). Under the ledger's lock.
std::exception_ptr WaitForOlder(const std::map<std::string, Handle>& in_flight,
                                const std::string& name, const std::string& what,
                                std::chrono::milliseconds timeout) {
  auto older = in_flight.find(name);
  if (older == in_flight.end() || older->second.Poll()) return nullptr;
  const Status waited =
      timeout.count() > 0
          ? older->second.Synchronize(std::chrono::duration<double>(timeout).count())
          : older->second.Synchronize();
  if (older->second.Poll()) return nullptr;  // done, whatever its outcome (its own work's)
  if (waited.code() != StatusCode::kDeadlineExceeded) return ToException(waited, what);
  // That earlier collective timed out: as after a wait() (KoloWork), the job ends.
  return EndJobAfterTimeout(
      older->second,
      "the earlier collective of kolo name '" + name + "' that " + what + " waits for", timeout);
}

}  // namespace

KoloBackend::KoloBackend(Config config)
    : c10d::Backend(config.rank, config.size),
      config_(std::move(config)),
      timeout_ms_(config_.timeout.count()),
      ledger_(config_.group_name),
      peers_(PeerGroupOf(config_)) {
  init();
}

c10::intrusive_ptr<c10d::Backend::Options> KoloBackend::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("kolo", std::chrono::milliseconds(timeout_ms_));
  options->group_name = config_.group_name;
  for (int rank : config_.ranks) options->global_ranks_in_group.push_back(rank);
  return options;
}

void KoloBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ms_ = timeout.count();
}

uint64_t KoloBackend::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(ledger_.mu);
  return ledger_.namer.sequence();
}

void KoloBackend::shutdown() {
  closed_ = true;
}

std::chrono::milliseconds KoloBackend::TimeoutOf(std::chrono::milliseconds requested) const {
  return requested == c10d::kUnsetTimeout ? std::chrono::milliseconds(timeout_ms_.load())
                                          : requested;
}

void KoloBackend::CheckUsable(const char* op, bool collective) const {
  if (closed_) {
    throw c10::DistBackendError(
        c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
        std::string("kolo: ") + op + " on process group '" + config_.group_name +
            "', which was shut down (destroy_process_group)");
  }
  const std::string broken = collective ? health_->broken() : std::string();
  if (!broken.empty()) {
    Fail(std::string(op) + " on process group '" + config_.group_name +
         "', whose ranks no longer call the same collectives: " + broken);
  }
}

c10::intrusive_ptr<c10d::Work> KoloBackend::Issue(Launch launch, const Enqueue& enqueue) {
  std::optional<pybind11::gil_scoped_release> no_gil;
  if (PyGILState_Check() != 0) no_gil.emplace();
  // kolo reads device memory on its own stream: what torch queued must be done first.
  for (const at::Tensor& tensor : launch.cuda_inputs) {
    c10::impl::VirtualGuardImpl guard(tensor.device().type());
    guard.getStream(tensor.device()).synchronize();
  }
  std::lock_guard<std::mutex> lock(ledger_.mu);
  CheckUsable(launch.op);
  const std::chrono::milliseconds timeout = TimeoutOf(launch.timeout);
  const std::string name = ledger_.namer.Next(launch.signature.value());
  const std::string what = OpInGroup(launch.op, ledger_.namer.sequence(), config_.group_name);
  // kolo takes one op per name at a time: the older one of this name must be done here first.
  std::exception_ptr older_failed = WaitForOlder(ledger_.in_flight, name, what, timeout);
  if (older_failed) {
    ledger_.namer.Retract();
    std::rethrow_exception(older_failed);
  }
  KoloWork::Spec spec;
  spec.rank = config_.rank;
  spec.type = launch.type;
  spec.title = launch.title;
  spec.what = what;
  spec.outputs = std::move(launch.outputs);
  spec.keep_alive = std::move(launch.keep_alive);
  spec.finish = std::move(launch.finish);
  spec.timeout = timeout;
  spec.sequence = ledger_.namer.sequence();
  spec.health = health_;
  auto work = c10::make_intrusive<KoloWork>(std::move(spec));
  std::vector<Handle> prior;
  if (launch.barrier) {
    for (const auto& [older_name, handle] : ledger_.in_flight) {
      if (!handle.Poll()) prior.push_back(handle);
    }
  }
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    ProcessSetScope in_set(config_.process_set);
    handle = enqueue_tracked([&](Callback done) { return enqueue(name, std::move(done)); },
                             [work](const Status& status) { work->Complete(status); },
                             /*drive=*/!launch.async);
  }
  if (!handle.ok()) {
    ledger_.namer.Retract();  // refused here before kolo took it: it does not count
    std::rethrow_exception(ToException(handle.status(), what));
  }
  work->Track(*handle, std::move(prior));
  peers_.coalescer().Add(work);
  ledger_.in_flight[name] = *handle;
  if (ledger_.in_flight.size() > 4096) {  // a job with ever new shapes: forget what completed
    for (auto it = ledger_.in_flight.begin(); it != ledger_.in_flight.end();) {
      it = it->second.Poll() ? ledger_.in_flight.erase(it) : std::next(it);
    }
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> KoloBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  if (opts.sparseIndices.has_value()) Fail("allreduce of sparse tensors is not supported");
  const at::Tensor tensor = Single(tensors, "allreduce");
  const AllreduceOptions reduction = Reduction(opts.reduceOp, tensor, "allreduce");
  auto io = std::make_shared<Contiguous>(tensor);
  const TensorView view = View(io->buffer, "allreduce");
  Launch launch;
  launch.type = c10d::OpType::ALLREDUCE;
  launch.title = "kolo:all_reduce";
  launch.op = "allreduce";
  AddView(&Begin(&launch.signature, OpType::kAllreduce), view);
  launch.signature.Add(static_cast<int64_t>(reduction.op)).Add(reduction.prescale);
  launch.outputs = {tensor};
  launch.keep_alive = {io->buffer};
  if (tensor.is_cuda()) launch.cuda_inputs = {io->buffer};
  if (!io->buffer.is_same(tensor)) launch.finish = [io] { return io->CopyBack(); };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&view, &reduction](const std::string& name, Callback done) {
    return kolo::allreduce_async(name, view, view, reduction, std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  if (tensors.empty()) Fail("allreduce_coalesced of no tensors");
  const AllreduceOptions reduction = Reduction(opts.reduceOp, tensors[0], "allreduce_coalesced");
  Launch launch;
  launch.type = c10d::OpType::ALLREDUCE_COALESCED;
  launch.title = "kolo:allreduce_coalesced";
  launch.op = "allreduce_coalesced";
  Begin(&launch.signature, OpType::kAllreduce)
      .Add(static_cast<int64_t>(reduction.op))
      .Add(reduction.prescale)
      .Add(static_cast<int64_t>(tensors.size()));
  std::vector<std::shared_ptr<Contiguous>> ios;
  std::vector<TensorView> views;
  for (const at::Tensor& tensor : tensors) {
    ios.push_back(std::make_shared<Contiguous>(tensor));
    views.push_back(View(ios.back()->buffer, "allreduce_coalesced"));
    AddView(&launch.signature, views.back());
    launch.keep_alive.push_back(ios.back()->buffer);
    if (tensor.is_cuda()) launch.cuda_inputs.push_back(ios.back()->buffer);
  }
  launch.outputs = tensors;
  launch.finish = CopyBackAll(std::move(ios));
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::grouped_allreduce_async(MemberNames(name, views.size()), views, views, reduction,
                                         std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  // An allreduce whose result only the root keeps: the others' tensors stay as they were.
  const at::Tensor tensor = Single(tensors, "reduce");
  CheckRoot(opts.rootRank, size_, "reduce");
  const AllreduceOptions reduction = Reduction(opts.reduceOp, tensor, "reduce");
  const bool root = opts.rootRank == rank_;
  auto io = std::make_shared<Contiguous>(tensor);
  const at::Tensor output = root ? io->buffer : at::empty_like(io->buffer);
  const TensorView in = View(io->buffer, "reduce");
  const TensorView out = View(output, "reduce");
  Launch launch;
  launch.type = c10d::OpType::REDUCE;
  launch.title = "kolo:reduce";
  launch.op = "reduce";
  // Not the root: kolo does not compare it (every rank computes the sum), so ranks that
  // disagree about it still agree on the names after it.
  AddView(&Begin(&launch.signature, OpType::kAllreduce), in);
  launch.signature.Add(static_cast<int64_t>(reduction.op)).Add(reduction.prescale);
  launch.outputs = {tensor};
  launch.keep_alive = {io->buffer, output};
  if (tensor.is_cuda()) launch.cuda_inputs = {io->buffer};
  if (root && !io->buffer.is_same(tensor)) launch.finish = [io] { return io->CopyBack(); };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::allreduce_async(name, in, out, reduction, std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  const at::Tensor tensor = Single(tensors, "broadcast");
  CheckRoot(opts.rootRank, size_, "broadcast");
  const int root = config_.ranks[static_cast<size_t>(opts.rootRank)];  // kolo's roots: job ranks
  auto io = std::make_shared<Contiguous>(tensor);
  const TensorView view = View(io->buffer, "broadcast");
  Launch launch;
  launch.type = c10d::OpType::BROADCAST;
  launch.title = "kolo:broadcast";
  launch.op = "broadcast";
  AddView(&Begin(&launch.signature, OpType::kBroadcast), view);
  launch.signature.Add(int64_t{root});
  launch.outputs = {tensor};
  launch.keep_alive = {io->buffer};
  if (tensor.is_cuda()) launch.cuda_inputs = {io->buffer};
  if (!io->buffer.is_same(tensor)) launch.finish = [io] { return io->CopyBack(); };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::broadcast_async(name, view, root, std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::barrier(const c10d::BarrierOptions& opts) {
  // A one-byte allreduce: named and ordered like any collective (a rank that calls something
  // else here gets the mismatch error), cached on kolo's fast path after its first uses, and it
  // completes only after the group's earlier collectives, as gloo's barrier does.
  const at::Tensor flag = at::zeros({1}, at::kByte);
  const TensorView view = View(flag, "barrier");
  Launch launch;
  launch.type = c10d::OpType::BARRIER;
  launch.title = "kolo:barrier";
  launch.op = "barrier";
  AddView(&Begin(&launch.signature, OpType::kAllreduce), view);
  launch.signature.Add(static_cast<int64_t>(ReduceOp::kSum)).Add(1.0);
  launch.keep_alive = {flag};
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  launch.barrier = true;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::allreduce_async(name, view, view, AllreduceOptions{}, std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  CheckUsable("send", /*collective=*/false);
  return peers_.Send(Single(tensors, "send"), dst_rank, tag, TimeoutOf(c10d::kUnsetTimeout));
}

c10::intrusive_ptr<c10d::Work> KoloBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  CheckUsable("recv", /*collective=*/false);
  return peers_.Recv(Single(tensors, "recv"), src_rank, tag, TimeoutOf(c10d::kUnsetTimeout));
}

c10::intrusive_ptr<c10d::Work> KoloBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  CheckUsable("recv", /*collective=*/false);
  return peers_.Recv(Single(tensors, "recv"), kAnySource, tag, TimeoutOf(c10d::kUnsetTimeout));
}

void KoloBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  CheckUsable("monitored_barrier", /*collective=*/false);
  const bool torch_default = opts.timeout == ::kProcessGroupDefaultTimeout;
  peers_.MonitoredBarrier(TimeoutOf(torch_default ? c10d::kUnsetTimeout : opts.timeout),
                          wait_all_ranks);
}

void KoloBackend::startCoalescing() {
  CheckUsable("startCoalescing", /*collective=*/false);
  peers_.coalescer().Start(config_.group_name);
}

c10::intrusive_ptr<c10d::Work> KoloBackend::endCoalescing() {
  return peers_.coalescer().End(rank_, config_.group_name);
}

}  // namespace kolo::torch_ext
