// kolo.torch._C's c10d functions: starting kolo for a torch.distributed job, making backends,
// adding a group's process set. Errors are RuntimeErrors (c10::Error, DistBackendError when
// the job failed), as torch's own rendezvous raises them.
//
// Threading: called from Python with the GIL; every wait releases it.
#include "python/csrc/c10d/c10d_bindings.h"

#include <pybind11/stl.h>
#include <torch/extension.h>

#include <algorithm>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "kolo/kolo.h"
#include "python/csrc/c10d/kolo_backend.h"

namespace py = pybind11;

namespace kolo::torch_ext {
namespace {

void ThrowIfError(const Status& status, const std::string& what) {
  if (!status.ok()) std::rethrow_exception(ToException(status, what));
}

// Starts kolo's default runtime for a torch.distributed job. The environment's options
// (KOLO_*, and Horovod's names) apply, except what the rendezvous decided: a non-empty
// `controller` (with `secret` and `job_id`) replaces the environment's job, and `rank` and
// `size` are c10d's. `timeout_seconds` (init_process_group's) caps kolo's deadlines.
void C10dInit(int rank, int size, const std::string& controller, const std::string& secret,
              const std::string& job_id, double timeout_seconds) {
  StatusOr<Options> read = Options::FromEnvironment();
  ThrowIfError(read.status(), "init_process_group (reading kolo's environment)");
  Options options = *read;
  if (!controller.empty()) {
    options.controller_address = controller;
    options.controller_source = "torch.distributed's store";
    options.secret = secret;
    options.secret_file.clear();
    options.job_id = job_id;
  }
  if (options.rank != rank || options.size != size) {
    options.identity_source = "torch.distributed";
    options.local_rank = -1;  // from the host names every rank reports
    options.local_size = -1;
  }
  options.rank = rank;
  options.size = size;
  if (timeout_seconds > 0) {
    options.timeout_seconds = std::min(options.timeout_seconds, timeout_seconds);
    options.start_timeout_seconds = std::min(options.start_timeout_seconds, timeout_seconds);
  }
  Status status;
  {
    py::gil_scoped_release no_gil;
    status = kolo::init(options);
  }
  ThrowIfError(status, "init_process_group");
}

c10::intrusive_ptr<c10d::Backend> MakeBackend(int rank, int size, int process_set,
                                              std::vector<int> ranks, std::string group_name,
                                              double timeout_seconds) {
  KoloBackend::Config config;
  config.rank = rank;
  config.size = size;
  config.process_set = process_set;
  config.ranks = std::move(ranks);
  config.group_name = std::move(group_name);
  config.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  if (static_cast<int>(config.ranks.size()) != size || rank < 0 || rank >= size) {
    c10d_args::Fail("a backend of rank " + std::to_string(rank) + " in a group of " +
                    std::to_string(size) + " with " + std::to_string(config.ranks.size()) +
                    " job ranks");
  }
  return c10::make_intrusive<KoloBackend>(std::move(config));
}

// Waits for `handle`, an op of new_group's that every rank of the job submits, at most
// `timeout_seconds`, and returns its outcome; past that the job ends as after a collective's
// timeout (EndJobAfterTimeout), and this throws, unless the op completed after all.
Status WaitInNewGroup(const Handle& handle, const std::string& what, double timeout_seconds) {
  std::exception_ptr timed_out;
  {
    py::gil_scoped_release no_gil;
    const Status status = handle.Synchronize(timeout_seconds);
    if (status.code() != StatusCode::kDeadlineExceeded || handle.Poll()) return status;
    timed_out = EndJobAfterTimeout(
        handle, what, std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  }
  if (timed_out) std::rethrow_exception(timed_out);
  return handle.Synchronize();  // completed after all
}

// kolo's add_process_set, bounded: every rank of the job must call it (torch's new_group
// contract); one that does not within `timeout_seconds` ends the job (WaitInNewGroup).
int C10dAddProcessSet(const std::vector<int>& ranks, double timeout_seconds) {
  auto id = std::make_shared<int>(-1);
  StatusOr<Handle> handle = kolo::add_process_set_async(ranks, id.get());
  ThrowIfError(handle.status(), "new_group");
  const std::string what =
      "new_group(" + ShapeToString(std::vector<int64_t>(ranks.begin(), ranks.end())) +
      "), which every rank of the job must call: kolo makes a group's process set with every "
      "rank, as torch's new_group asks (use_local_synchronization=True is not supported)";
  Status status;
  try {
    status = WaitInNewGroup(*handle, what, timeout_seconds);
  } catch (...) {
    if (!handle->Poll()) {
      // Still in flight in kolo, it may outlive this call: it keeps `id` alive.
      static auto* abandoned = new std::vector<std::pair<Handle, std::shared_ptr<int>>>();
      abandoned->emplace_back(*handle, id);
    }
    throw;
  }
  ThrowIfError(status, "new_group");
  return *id;
}

// The process sets of destroyed kolo sub-groups, removed (distributed.py's new_group calls it
// on every rank, before it adds the new group's set). `ids`: the sets kolo's sub-groups made in
// this job and not yet removed, in the order every rank made them; `destroyed[i]`: 1 where this
// rank is a member of set ids[i] and destroyed its group; `sizes[i]`: its number of members.
// One allreduce over the job sums the votes, so that every rank removes the same sets (a
// removal is a collective of every rank, which destroy_process_group(group) is not: torch
// calls it on the members only). `round` names the allreduce (the same count on every rank).
// Returns the ids removed. A removal kolo refuses (an op of the set still in flight on some
// member: FailedPrecondition, on every rank alike) is left for the next call, with a warning.
std::vector<int> ReleaseDestroyedSets(const std::vector<int>& ids,
                                      const std::vector<int>& destroyed,
                                      const std::vector<int>& sizes, int64_t round,
                                      double timeout_seconds) {
  if (ids.size() != destroyed.size() || ids.size() != sizes.size()) {
    c10d_args::Fail("c10d_release_destroyed_sets: ids, destroyed and sizes differ in length");
  }
  if (ids.empty()) return {};
  std::vector<int32_t> votes(destroyed.begin(), destroyed.end());
  TensorView view;
  view.data = votes.data();
  view.dtype = DataType::kInt32;
  view.shape = {static_cast<int64_t>(votes.size())};
  const std::string what = "new_group (agreeing on which destroyed groups' sets to remove)";
  StatusOr<Handle> agreed = kolo::allreduce_async("c10d.sets/" + std::to_string(round), view, view);
  ThrowIfError(agreed.status(), what);
  ThrowIfError(WaitInNewGroup(*agreed, what, timeout_seconds), what);
  std::vector<int> removed;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (votes[i] != sizes[i]) continue;
    const std::string removing =
        "new_group (removing process set " + std::to_string(ids[i]) + " of a destroyed group)";
    StatusOr<Handle> removal = kolo::remove_process_set_async(ids[i]);
    const Status status =
        removal.ok() ? WaitInNewGroup(*removal, removing, timeout_seconds) : removal.status();
    if (status.ok()) {
      removed.push_back(ids[i]);
    } else if (status.code() == StatusCode::kFailedPrecondition) {
      TORCH_WARN("kolo: ", removing, " is left for the next new_group: ", status.message());
    } else {
      ThrowIfError(status, removing);
    }
  }
  return removed;
}

// torch's C++ ProcessGroup as its own Python type, without the trampoline (PyProcessGroup) that
// torch's Python ProcessGroup type has: a Python subclass of that one makes every collective
// called from C++ (dist.all_reduce, DDP's reducer) take the GIL and look for a Python override
// first, 5 us of a 4 KiB allreduce's 14 here. KoloProcessGroup (distributed.py) subclasses this
// one instead; its Python methods (new_group, shutdown) are those torch calls from Python.
class ProcessGroupBase : public c10d::ProcessGroup {
 public:
  using c10d::ProcessGroup::ProcessGroup;
};

}  // namespace

void RegisterC10d(py::module_& module) {
  py::class_<ProcessGroupBase, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupBase>>(
      module, "ProcessGroupBase")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
             return c10::make_intrusive<ProcessGroupBase>(store, rank, size);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"));
  module.def("c10d_init", &C10dInit, py::arg("rank"), py::arg("size"), py::arg("controller"),
             py::arg("secret"), py::arg("job_id"), py::arg("timeout_seconds"));
  module.def("c10d_backend", &MakeBackend, py::arg("rank"), py::arg("size"), py::arg("process_set"),
             py::arg("ranks"), py::arg("group_name"), py::arg("timeout_seconds"));
  module.def("c10d_add_process_set", &C10dAddProcessSet, py::arg("ranks"),
             py::arg("timeout_seconds"));
  module.def("c10d_release_destroyed_sets", &ReleaseDestroyedSets, py::arg("ids"),
             py::arg("destroyed"), py::arg("sizes"), py::arg("round"), py::arg("timeout_seconds"));
}

}  // namespace kolo::torch_ext
