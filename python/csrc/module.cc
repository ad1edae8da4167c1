// kolo.torch._C: the pybind11 module under kolo.torch (python/kolo/torch/*.py has the API).
// Each function converts torch tensors to kolo views (no copies), calls kolo's public C++ API
// with the GIL released, and turns a failed kolo::Status into the Python exception
// kolo.torch.errors.from_status picks: the one place where kolo's statuses become exceptions.
//
// Threading: every function may be called from any Python thread. Waits (init, synchronize,
// shutdown, adding and removing process sets) release the GIL; ops run in the process set the
// caller names (a ProcessSetScope around the enqueue, on the releasing thread); synchronize wakes
// every 100 ms to let Python handle signals.
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "python/csrc/c10d/c10d_bindings.h"
#include "python/csrc/handle_table.h"
#include "python/csrc/tensor_view.h"

namespace py = pybind11;

namespace kolo::torch_ext {
namespace {

// A failed kolo::Status on its way to Python (see the translator in the module body).
// `submitted`: the op had been taken by kolo (it failed later, on the way or while waiting), as
// opposed to refused before it was submitted; Python keeps an unnamed op's number only then.
class StatusError : public std::exception {
 public:
  StatusError(Status status, bool submitted) : status_(std::move(status)), submitted_(submitted) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }
  bool submitted() const { return submitted_; }

 private:
  Status status_;
  bool submitted_;
};

// For errors before an op was submitted (bad arguments, a refused enqueue).
void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status, false);
}

// For the outcome of an op kolo took.
void ThrowIfOpFailed(const Status& status) {
  if (!status.ok()) throw StatusError(status, true);
}

HandleTable& Table() {
  static HandleTable* table = new HandleTable();  // never destroyed: ops may outlive the module
  return *table;
}

TensorView View(const at::Tensor& tensor, const std::string& what) {
  std::string error;
  std::optional<TensorView> view = ToView(tensor, what, &error);
  if (!view) ThrowIfError(InvalidArgument(error));
  return *view;
}

std::vector<TensorView> Views(const std::vector<at::Tensor>& tensors,
                              const std::vector<std::string>& names, const std::string& op) {
  if (tensors.size() != names.size()) {
    ThrowIfError(InvalidArgument(op + ": " + std::to_string(tensors.size()) + " tensors but " +
                                 std::to_string(names.size()) + " names"));
  }
  std::vector<TensorView> views;
  views.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    views.push_back(View(tensors[i], op + " '" + names[i] + "'"));
  }
  return views;
}

ReduceOp ToReduceOp(int op) {
  if (!IsValidReduceOp(op))
    ThrowIfError(InvalidArgument("unknown reduce op " + std::to_string(op)));
  return static_cast<ReduceOp>(op);
}

AllreduceOptions ReduceOptions(int op, double prescale, double postscale) {
  AllreduceOptions options;
  options.op = ToReduceOp(op);
  options.prescale = prescale;
  options.postscale = postscale;
  return options;
}

// Registers `op` once its handle (or the enqueue error) is known.
int64_t Register(std::shared_ptr<PendingOp> op, StatusOr<Handle> handle) {
  ThrowIfError(handle.status());
  op->handle = *handle;
  return Table().Add(std::move(op));
}

// An allocator that makes member `index`'s output on kolo's background thread (no GIL needed).
Allocator AllocatorFor(const std::shared_ptr<PendingOp>& op, size_t index,
                       at::TensorOptions options) {
  return [op, index, options](const std::vector<int64_t>& shape) -> void* {
    at::Tensor output;
    try {
      output = at::empty(shape, options);
    } catch (const std::exception&) {
      return nullptr;  // kolo fails the op (no memory for the output); nothing may throw here
    }
    std::lock_guard<std::mutex> lock(op->allocated_mutex);
    op->allocated[index] = output;
    return output.data_ptr();
  };
}

int64_t AllreduceAsync(const std::vector<std::string>& names, const std::vector<at::Tensor>& inputs,
                       const std::vector<at::Tensor>& outputs, int op, double prescale,
                       double postscale, bool grouped, int process_set) {
  std::vector<TensorView> in = Views(inputs, names, "allreduce");
  std::vector<TensorView> out = Views(outputs, names, "allreduce");
  AllreduceOptions options = ReduceOptions(op, prescale, postscale);
  auto pending = std::make_shared<PendingOp>();
  pending->keep_alive = inputs;
  pending->outputs = outputs;
  StatusOr<Handle> handle = InvalidArgument("allreduce: no tensors");
  {
    py::gil_scoped_release release;
    ProcessSetScope in_set(process_set);
    if (grouped) {
      handle = kolo::grouped_allreduce_async(names, in, out, options);
    } else if (!names.empty()) {
      handle = kolo::allreduce_async(names[0], in[0], out[0], options);
    }
  }
  return Register(std::move(pending), std::move(handle));
}

int64_t AllgatherAsync(const std::vector<std::string>& names, const std::vector<at::Tensor>& inputs,
                       bool grouped, int process_set) {
  std::vector<TensorView> in = Views(inputs, names, "allgather");
  auto pending = std::make_shared<PendingOp>();
  pending->keep_alive = inputs;
  pending->allocated.resize(inputs.size());
  std::vector<Allocator> allocators;
  for (size_t i = 0; i < inputs.size(); ++i) {
    allocators.push_back(AllocatorFor(pending, i, inputs[i].options()));
  }
  StatusOr<Handle> handle = InvalidArgument("allgather: no tensors");
  {
    py::gil_scoped_release release;
    ProcessSetScope in_set(process_set);
    if (grouped) {
      handle = kolo::grouped_allgather_async(names, in, std::move(allocators));
    } else if (!names.empty()) {
      handle = kolo::allgather_async(names[0], in[0], std::move(allocators[0]));
    }
  }
  return Register(std::move(pending), std::move(handle));
}

int64_t BroadcastAsync(const std::string& name, const at::Tensor& input, const at::Tensor& output,
                       int root, int process_set) {
  TensorView in = View(input, "broadcast '" + name + "'");
  TensorView out = View(output, "broadcast '" + name + "'");
  auto pending = std::make_shared<PendingOp>();
  pending->keep_alive = {input};
  pending->outputs = {output};
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    py::gil_scoped_release release;
    ProcessSetScope in_set(process_set);
    handle = kolo::broadcast_async(name, in, out, root);
  }
  return Register(std::move(pending), std::move(handle));
}

int64_t AlltoallAsync(const std::string& name, const at::Tensor& input,
                      const std::vector<int64_t>& splits, int process_set) {
  TensorView in = View(input, "alltoall '" + name + "'");
  auto pending = std::make_shared<PendingOp>();
  pending->keep_alive = {input};
  pending->allocated.resize(1);
  Allocator allocate = AllocatorFor(pending, 0, input.options());
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    py::gil_scoped_release release;
    ProcessSetScope in_set(process_set);
    handle = kolo::alltoall_async(name, in, splits, std::move(allocate), &pending->received_splits);
  }
  return Register(std::move(pending), std::move(handle));
}

int64_t ReducescatterAsync(const std::vector<std::string>& names,
                           const std::vector<at::Tensor>& inputs, int op, double prescale,
                           double postscale, bool grouped, int process_set) {
  std::vector<TensorView> in = Views(inputs, names, "reducescatter");
  AllreduceOptions options = ReduceOptions(op, prescale, postscale);
  auto pending = std::make_shared<PendingOp>();
  pending->keep_alive = inputs;
  // Parts follow the set's ranks; outside the set (rank -1) the enqueue below fails, naming it.
  const int set_rank = std::max(kolo::process_set_rank(process_set), 0);
  const int set_size = std::max(kolo::process_set_size(process_set), 1);
  std::vector<TensorView> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int64_t> shape = inputs[i].dim() == 0
                                     ? std::vector<int64_t>{}
                                     : ReducescatterShape(in[i].shape, set_rank, set_size);
    pending->outputs.push_back(at::empty(shape, inputs[i].options()));
    out.push_back(View(pending->outputs.back(), "reducescatter '" + names[i] + "'"));
  }
  StatusOr<Handle> handle = InvalidArgument("reducescatter: no tensors");
  {
    py::gil_scoped_release release;
    ProcessSetScope in_set(process_set);
    if (grouped) {
      handle = kolo::grouped_reducescatter_async(names, in, out, options);
    } else if (!names.empty()) {
      handle = kolo::reducescatter_async(names[0], in[0], out[0], options);
    }
  }
  return Register(std::move(pending), std::move(handle));
}

int64_t JoinAsync(int process_set) {
  auto pending = std::make_shared<PendingOp>();
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    py::gil_scoped_release release;
    ProcessSetScope in_set(process_set);
    handle = kolo::join_async(&pending->last_rank);
  }
  return Register(std::move(pending), std::move(handle));
}

int64_t BarrierAsync(int process_set) {
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    py::gil_scoped_release release;
    ProcessSetScope in_set(process_set);
    handle = kolo::barrier_async();
  }
  return Register(std::make_shared<PendingOp>(), std::move(handle));
}

std::shared_ptr<PendingOp> FindOrThrow(int64_t id) {
  std::shared_ptr<PendingOp> op = Table().Find(id);
  if (!op) ThrowIfError(InvalidArgument("handle " + std::to_string(id) + " is not in flight"));
  return op;
}

bool Poll(int64_t id) {
  return FindOrThrow(id)->handle.Poll();
}

// Waits for `handle` with the GIL released, in 100 ms slices between which Python may raise
// for a signal (KeyboardInterrupt): then `on_interrupt` runs and the exception propagates.
template <typename OnInterrupt>
void WaitInterruptibly(const Handle& handle, OnInterrupt&& on_interrupt) {
  while (!handle.Poll()) {
    {
      py::gil_scoped_release release;
      // A 100 ms slice: its kDeadlineExceeded only says the op is still running.
      handle.Synchronize(0.1).IgnoreError();
    }
    if (PyErr_CheckSignals() != 0) {
      on_interrupt();
      throw py::error_already_set();
    }
  }
}

// allreduce_ of one contiguous CPU tensor, enqueued and waited for in one call: no handle id,
// no table entry and no list conversions on the way (the common case of kolo.torch's
// allreduce_; docs/TORCH-RACE.md). An interrupt hands the op to the table, which keeps the
// tensor alive until it completes.
void AllreduceInPlace(const std::string& name, const at::Tensor& tensor, int op, double prescale,
                      double postscale, int process_set) {
  const TensorView view = View(tensor, "allreduce '" + name + "'");
  const AllreduceOptions options = ReduceOptions(op, prescale, postscale);
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    py::gil_scoped_release release;
    ProcessSetScope in_set(process_set);
    // Runs the op on this thread when it can (no hand-off to kolo's thread); the rest of the
    // wait stays interruptible.
    handle = kolo::allreduce_async_driven(name, view, view, options);
  }
  ThrowIfError(handle.status());
  WaitInterruptibly(*handle, [&] {
    auto pending = std::make_shared<PendingOp>();
    pending->keep_alive = {tensor};
    pending->handle = *handle;
    Table().Add(std::move(pending));
  });
  ThrowIfOpFailed(handle->Synchronize());  // complete: returns at once
}

// Waits for op `id` and returns (outputs, received splits, last joined rank). The op leaves the
// table once it completed, failed or not; an interrupt (KeyboardInterrupt) leaves it there.
py::tuple Synchronize(int64_t id) {
  std::shared_ptr<PendingOp> op = FindOrThrow(id);
  WaitInterruptibly(op->handle, [] {});
  Status status = op->handle.Synchronize();  // complete: returns at once
  Table().Erase(id);
  ThrowIfOpFailed(status);
  std::vector<at::Tensor> outputs;
  {
    std::lock_guard<std::mutex> lock(op->allocated_mutex);
    outputs = op->allocated.empty() ? op->outputs : op->allocated;
  }
  return py::make_tuple(outputs, op->received_splits, op->last_rank);
}

void Init() {
  Status status;
  {
    py::gil_scoped_release release;
    status = kolo::init();
  }
  ThrowIfError(status);
}

void Shutdown() {
  Status status;
  {
    py::gil_scoped_release release;
    status = kolo::shutdown();
  }
  ThrowIfError(status);
}

// Process sets: adding and removing are collective over every rank of the job, so they wait
// with the GIL released (bounded by kolo's own deadlines).
int AddProcessSet(const std::vector<int>& ranks) {
  StatusOr<int> id = InvalidArgument("unreached");
  {
    py::gil_scoped_release release;
    id = kolo::add_process_set(ranks);
  }
  ThrowIfError(id.status());
  return *id;
}

void RemoveProcessSet(int process_set) {
  Status status;
  {
    py::gil_scoped_release release;
    status = kolo::remove_process_set(process_set);
  }
  ThrowIfError(status);
}

// Whether hosts changed after `since` (kolo::elastic::poll_host_updates, which asks kolorun's
// elastic driver: the GIL is released while it waits): (timestamp, kinds).
py::tuple ElasticPoll(int64_t since) {
  StatusOr<elastic::HostUpdates> updates = InvalidArgument("unreached");
  {
    py::gil_scoped_release release;
    updates = elastic::poll_host_updates(since);
  }
  ThrowIfError(updates.status());
  return py::make_tuple(updates->timestamp, updates->kinds);
}

// The ids of the ops that completed and were never synchronized, forgotten (after shutdown).
std::vector<int64_t> ForgetCompletedOps() {
  return Table().EraseCompleted();
}

void StartTimeline(const std::string& path, bool mark_cycles) {
  Status status;
  {
    py::gil_scoped_release release;
    status = kolo::start_timeline(path, mark_cycles);
  }
  ThrowIfError(status);
}

void StopTimeline() {
  Status status;
  {
    py::gil_scoped_release release;
    status = kolo::stop_timeline();
  }
  ThrowIfError(status);
}

}  // namespace
}  // namespace kolo::torch_ext

PYBIND11_MODULE(_C, m) {
  namespace ext = kolo::torch_ext;
  m.doc() = "kolo.torch's native part (use kolo.torch)";
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const ext::StatusError& error) {
      py::object from_status = py::module_::import("kolo.torch.errors").attr("from_status");
      py::object exception =
          from_status(kolo::StatusCodeName(error.status().code()), error.status().message());
      exception.attr("submitted") = py::bool_(error.submitted());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
    }
  });
  m.def("init", &ext::Init);
  m.def("shutdown", &ext::Shutdown);
  m.def("is_initialized", &kolo::is_initialized);
  m.def("rank", &kolo::rank);
  m.def("size", &kolo::size);
  m.def("local_rank", &kolo::local_rank);
  m.def("local_size", &kolo::local_size);
  m.def("cross_rank", &kolo::cross_rank);
  m.def("cross_size", &kolo::cross_size);
  m.def("version", &kolo::version);
  m.def("start_timeline", &ext::StartTimeline);
  m.def("add_process_set", &ext::AddProcessSet);
  m.def("remove_process_set", &ext::RemoveProcessSet);
  m.def("process_set_rank", &kolo::process_set_rank);
  m.def("process_set_size", &kolo::process_set_size);
  m.def("process_set_ranks", &kolo::process_set_ranks);
  m.def("stop_timeline", &ext::StopTimeline);
  m.def("allreduce_async", &ext::AllreduceAsync);
  m.def("allreduce_in_place", &ext::AllreduceInPlace);
  m.def("allgather_async", &ext::AllgatherAsync);
  m.def("broadcast_async", &ext::BroadcastAsync);
  m.def("alltoall_async", &ext::AlltoallAsync);
  m.def("reducescatter_async", &ext::ReducescatterAsync);
  m.def("join_async", &ext::JoinAsync);
  m.def("barrier_async", &ext::BarrierAsync);
  m.def("forget_completed_ops", &ext::ForgetCompletedOps);
  m.def("elastic_enabled", &kolo::elastic::enabled);
  m.def("elastic_poll", &ext::ElasticPoll);
  m.def("elastic_generation", &kolo::elastic::generation);
  m.def("poll", &ext::Poll);
  m.def("synchronize", &ext::Synchronize);
  // What this build of kolo has (CMake passes the same switches libkolo was built with).
  m.attr("cuda_built") = py::bool_(KOLO_TORCH_CUDA_BUILT != 0);
  m.attr("nccl_version") = py::int_(KOLO_TORCH_NCCL_VERSION);  // NCCL_VERSION_CODE; 0: none
  kolo::torch_ext::RegisterC10d(m);  // the torch.distributed backend (kolo/torch/distributed.py)
}
