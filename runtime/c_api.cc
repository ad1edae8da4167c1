// kolo's C API (kolo/c_api.h) over the default runtime of kolo/kolo.h. No exception crosses
// it: kolo itself does not throw, and every exported function runs its body in Guarded(),
// which turns anything the C++ library throws (std::bad_alloc from a string or vector) into
// KOLO_INTERNAL. A completion or allocator the C caller passes is C code and cannot throw.
#include "kolo/c_api.h"

#include <exception>
#include <string>
#include <vector>

#include "core/process_sets.h"
#include "kolo/kolo.h"
#include "kolo/p2p.h"
#include "runtime/handle_state.h"

namespace {

thread_local std::string tls_last_error;

int Report(const kolo::Status& status) {
  tls_last_error = status.ok() ? "" : status.message();
  return static_cast<int>(status.code());
}

kolo::TensorView View(const void* data, int64_t count, int dtype) {
  kolo::TensorView view;
  view.data = const_cast<void*>(data);
  view.dtype = static_cast<kolo::DataType>(dtype);
  view.shape = {count};
  return view;
}

kolo::TensorView Shaped(const void* data, const int64_t* shape, int ndim, int dtype) {
  kolo::TensorView view;
  view.data = const_cast<void*>(data);
  view.dtype = static_cast<kolo::DataType>(dtype);
  if (shape != nullptr && ndim > 0) view.shape.assign(shape, shape + ndim);
  return view;
}

kolo::internal::HandleState* StateOf(const kolo_handle* handle) {
  return reinterpret_cast<kolo::internal::HandleState*>(const_cast<kolo_handle*>(handle));
}

kolo::Callback Done(kolo_done_fn done, void* user) {
  // A handle's completion holds a reference of its own, so that the handle may be freed
  // before the op completes, or after its enqueue failed (the callback is then dropped).
  if (done == kolo_handle_done && user != nullptr) {
    return kolo::internal::HandleAccess::CompletionOf(StateOf(static_cast<kolo_handle*>(user)));
  }
  return [done, user](const kolo::Status& s) {
    done(static_cast<int>(s.code()), s.message().c_str(), user);
  };
}

kolo::Allocator Alloc(kolo_alloc_fn alloc, void* user) {
  if (alloc == nullptr) return nullptr;
  return [alloc, user](const std::vector<int64_t>& shape) -> void* {
    return alloc(shape.data(), static_cast<int>(shape.size()), user);
  };
}

int ReportThrown(const char* function, const char* what) noexcept {
  try {
    tls_last_error = std::string(function) + ": kolo threw " + what;
  } catch (...) {
    tls_last_error.clear();  // out of memory even for the message: the code still says it
  }
  return static_cast<int>(kolo::StatusCode::kInternal);
}

int Missing(const char* what) {
  return Report(kolo::InvalidArgument(std::string(what) + ": a required argument is NULL"));
}

kolo::AllreduceOptions Reduce(int reduce_op) {
  kolo::AllreduceOptions options;
  options.op = static_cast<kolo::ReduceOp>(reduce_op);
  return options;
}

// Runs `body` (which returns a kolo_status code) and reports anything it throws as
// KOLO_INTERNAL naming `function`, so that no exception reaches the C caller.
template <typename Body>
int Guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return ReportThrown(function, e.what());
  } catch (...) {
    return ReportThrown(function, "an unknown exception");
  }
}

// As Guarded, for the identity functions: `fallback` when `body` throws.
template <typename Body>
int GuardedValue(int fallback, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return fallback;
  }
}

}  // namespace

extern "C" {

const char* kolo_last_error(void) {
  return tls_last_error.c_str();
}

const char* kolo_status_name(int status) {
  if (status < KOLO_OK || status > KOLO_SHUTDOWN) return "UNKNOWN";
  return kolo::StatusCodeName(static_cast<kolo::StatusCode>(status));
}

const char* kolo_version(void) {
  return kolo::version();
}

int kolo_init_for_version(int header_version) {
  return Guarded("kolo_init", [&] { return Report(kolo::init_for_version(header_version)); });
}
int kolo_shutdown(void) {
  return Guarded("kolo_shutdown", [&] { return Report(kolo::shutdown()); });
}
int kolo_rank(void) {
  return GuardedValue(-1, [] { return kolo::rank(); });
}
int kolo_size(void) {
  return GuardedValue(-1, [] { return kolo::size(); });
}
int kolo_local_rank(void) {
  return GuardedValue(-1, [] { return kolo::local_rank(); });
}
int kolo_local_size(void) {
  return GuardedValue(-1, [] { return kolo::local_size(); });
}

int kolo_allreduce(const char* name, const void* input, void* output, int64_t count, int dtype,
                   int reduce_op) {
  return Guarded("kolo_allreduce", [&] {
    if (name == nullptr) return Report(kolo::InvalidArgument("kolo_allreduce: name is NULL"));
    return Report(kolo::allreduce(name, View(input, count, dtype), View(output, count, dtype),
                                  Reduce(reduce_op)));
  });
}

int kolo_allreduce_async(const char* name, const void* input, void* output, int64_t count,
                         int dtype, int reduce_op, kolo_done_fn done, void* user) {
  return Guarded("kolo_allreduce_async", [&] {
    if (name == nullptr || done == nullptr) {
      return Report(kolo::InvalidArgument("kolo_allreduce_async: name and done must be set"));
    }
    return Report(kolo::allreduce_async(name, View(input, count, dtype), View(output, count, dtype),
                                        Reduce(reduce_op), Done(done, user)));
  });
}

int kolo_broadcast(const char* name, void* data, int64_t count, int dtype, int root) {
  return Guarded("kolo_broadcast", [&] {
    if (name == nullptr) return Report(kolo::InvalidArgument("kolo_broadcast: name is NULL"));
    return Report(kolo::broadcast(name, View(data, count, dtype), root));
  });
}

int kolo_broadcast_async(const char* name, void* data, int64_t count, int dtype, int root,
                         kolo_done_fn done, void* user) {
  return Guarded("kolo_broadcast_async", [&] {
    if (name == nullptr || done == nullptr) return Missing("kolo_broadcast_async");
    return Report(kolo::broadcast_async(name, View(data, count, dtype), root, Done(done, user)));
  });
}

int kolo_broadcast_out_of_place(const char* name, const void* input, void* output, int64_t count,
                                int dtype, int root) {
  return Guarded("kolo_broadcast_out_of_place", [&] {
    if (name == nullptr) return Missing("kolo_broadcast_out_of_place");
    return Report(
        kolo::broadcast(name, View(input, count, dtype), View(output, count, dtype), root));
  });
}

int kolo_broadcast_out_of_place_async(const char* name, const void* input, void* output,
                                      int64_t count, int dtype, int root, kolo_done_fn done,
                                      void* user) {
  return Guarded("kolo_broadcast_out_of_place_async", [&] {
    if (name == nullptr || done == nullptr) return Missing("kolo_broadcast_out_of_place_async");
    return Report(kolo::broadcast_async(name, View(input, count, dtype), View(output, count, dtype),
                                        root, Done(done, user)));
  });
}

int kolo_start_timeline(const char* path, int mark_cycles) {
  return Guarded("kolo_start_timeline", [&] {
    if (path == nullptr) return Missing("kolo_start_timeline");
    return Report(kolo::start_timeline(path, mark_cycles != 0));
  });
}

int kolo_stop_timeline(void) {
  return Guarded("kolo_stop_timeline", [&] { return Report(kolo::stop_timeline()); });
}

int kolo_send(const void* data, int64_t count, int dtype, int dst, int64_t tag,
              double timeout_seconds) {
  return Guarded("kolo_send", [&] {
    return Report(kolo::send(View(data, count, dtype), dst, tag, {timeout_seconds}));
  });
}

int kolo_send_async(const void* data, int64_t count, int dtype, int dst, int64_t tag,
                    double timeout_seconds, kolo_done_fn done, void* user) {
  return Guarded("kolo_send_async", [&] {
    if (done == nullptr) return Missing("kolo_send_async");
    return Report(
        kolo::send_async(View(data, count, dtype), dst, tag, {timeout_seconds}, Done(done, user)));
  });
}

int kolo_recv(void* data, int64_t count, int dtype, int src, int64_t tag, double timeout_seconds,
              int* source) {
  return Guarded("kolo_recv", [&] {
    kolo::StatusOr<int> from = kolo::recv(View(data, count, dtype), src, tag, {timeout_seconds});
    if (from.ok() && source != nullptr) *source = *from;
    return Report(from.status());
  });
}

int kolo_recv_async(void* data, int64_t count, int dtype, int src, int64_t tag,
                    double timeout_seconds, int* source, kolo_done_fn done, void* user) {
  return Guarded("kolo_recv_async", [&] {
    if (done == nullptr) return Missing("kolo_recv_async");
    return Report(kolo::recv_async(View(data, count, dtype), src, tag, source, {timeout_seconds},
                                   Done(done, user)));
  });
}

int kolo_barrier(void) {
  return Guarded("kolo_barrier", [&] { return Report(kolo::barrier()); });
}

int kolo_barrier_async(kolo_done_fn done, void* user) {
  return Guarded("kolo_barrier_async", [&] {
    if (done == nullptr) return Missing("kolo_barrier_async");
    return Report(kolo::barrier_async(Done(done, user)));
  });
}

int kolo_allgather(const char* name, const void* input, const int64_t* shape, int ndim, int dtype,
                   kolo_alloc_fn alloc, void* alloc_user) {
  return Guarded("kolo_allgather", [&] {
    if (name == nullptr || alloc == nullptr) return Missing("kolo_allgather");
    return Report(
        kolo::allgather(name, Shaped(input, shape, ndim, dtype), Alloc(alloc, alloc_user)));
  });
}

int kolo_allgather_async(const char* name, const void* input, const int64_t* shape, int ndim,
                         int dtype, kolo_alloc_fn alloc, void* alloc_user, kolo_done_fn done,
                         void* user) {
  return Guarded("kolo_allgather_async", [&] {
    if (name == nullptr || alloc == nullptr || done == nullptr) {
      return Missing("kolo_allgather_async");
    }
    return Report(kolo::allgather_async(name, Shaped(input, shape, ndim, dtype),
                                        Alloc(alloc, alloc_user), Done(done, user)));
  });
}

int kolo_alltoall(const char* name, const void* input, const int64_t* shape, int ndim, int dtype,
                  const int64_t* splits, kolo_alloc_fn alloc, void* alloc_user,
                  int64_t* received_splits) {
  return Guarded("kolo_alltoall", [&] {
    if (name == nullptr || alloc == nullptr) return Missing("kolo_alltoall");
    const int size = kolo::size();
    std::vector<int64_t> split_list;
    if (splits != nullptr && size > 0) split_list.assign(splits, splits + size);
    std::vector<int64_t> received;
    const int status = Report(kolo::alltoall(name, Shaped(input, shape, ndim, dtype), split_list,
                                             Alloc(alloc, alloc_user), &received));
    if (status == KOLO_OK && received_splits != nullptr) {
      for (size_t i = 0; i < received.size(); ++i) received_splits[i] = received[i];
    }
    return status;
  });
}

int kolo_reducescatter(const char* name, const void* input, int64_t rows, int64_t row_elements,
                       void* output, int dtype, int reduce_op) {
  return Guarded("kolo_reducescatter", [&] {
    if (name == nullptr) return Missing("kolo_reducescatter");
    const std::vector<int64_t> part =
        kolo::ReducescatterShape({rows, row_elements}, kolo::rank(), kolo::size());
    const int64_t in_shape[2] = {rows, row_elements};
    return Report(kolo::reducescatter(name, Shaped(input, in_shape, 2, dtype),
                                      Shaped(output, part.data(), 2, dtype), Reduce(reduce_op)));
  });
}

int kolo_grouped_allreduce(int count, const char* const* names, const void* const* inputs,
                           void* const* outputs, const int64_t* element_counts, int dtype,
                           int reduce_op) {
  return Guarded("kolo_grouped_allreduce", [&] {
    if (count <= 0 || names == nullptr || inputs == nullptr || outputs == nullptr ||
        element_counts == nullptr) {
      return Missing("kolo_grouped_allreduce");
    }
    std::vector<std::string> name_list;
    std::vector<kolo::TensorView> in, out;
    for (int i = 0; i < count; ++i) {
      if (names[i] == nullptr) return Missing("kolo_grouped_allreduce");
      name_list.emplace_back(names[i]);
      in.push_back(View(inputs[i], element_counts[i], dtype));
      out.push_back(View(outputs[i], element_counts[i], dtype));
    }
    return Report(kolo::grouped_allreduce(name_list, in, out, Reduce(reduce_op)));
  });
}

int kolo_grouped_allgather(int count, const char* const* names, const void* const* inputs,
                           const int64_t* const* shapes, const int* ndims, const int* dtypes,
                           kolo_alloc_fn alloc, void* const* alloc_users) {
  return Guarded("kolo_grouped_allgather", [&] {
    if (count <= 0 || names == nullptr || inputs == nullptr || shapes == nullptr ||
        ndims == nullptr || dtypes == nullptr || alloc == nullptr) {
      return Missing("kolo_grouped_allgather");
    }
    std::vector<std::string> name_list;
    std::vector<kolo::TensorView> in;
    std::vector<kolo::Allocator> allocators;
    for (int i = 0; i < count; ++i) {
      if (names[i] == nullptr) return Missing("kolo_grouped_allgather");
      name_list.emplace_back(names[i]);
      in.push_back(Shaped(inputs[i], shapes[i], ndims[i], dtypes[i]));
      allocators.push_back(Alloc(alloc, alloc_users == nullptr ? nullptr : alloc_users[i]));
    }
    return Report(kolo::grouped_allgather(name_list, in, std::move(allocators)));
  });
}

int kolo_grouped_reducescatter(int count, const char* const* names, const void* const* inputs,
                               const int64_t* rows, const int64_t* row_elements,
                               void* const* outputs, const int* dtypes, int reduce_op) {
  return Guarded("kolo_grouped_reducescatter", [&] {
    if (count <= 0 || names == nullptr || inputs == nullptr || rows == nullptr ||
        row_elements == nullptr || outputs == nullptr || dtypes == nullptr) {
      return Missing("kolo_grouped_reducescatter");
    }
    std::vector<std::string> name_list;
    std::vector<kolo::TensorView> in, out;
    for (int i = 0; i < count; ++i) {
      if (names[i] == nullptr) return Missing("kolo_grouped_reducescatter");
      name_list.emplace_back(names[i]);
      const int64_t in_shape[2] = {rows[i], row_elements[i]};
      const std::vector<int64_t> part =
          kolo::ReducescatterShape({rows[i], row_elements[i]}, kolo::rank(), kolo::size());
      in.push_back(Shaped(inputs[i], in_shape, 2, dtypes[i]));
      out.push_back(Shaped(outputs[i], part.data(), 2, dtypes[i]));
    }
    return Report(kolo::grouped_reducescatter(name_list, in, out, Reduce(reduce_op)));
  });
}

kolo_handle* kolo_handle_new(void) {
  try {
    return reinterpret_cast<kolo_handle*>(kolo::internal::HandleAccess::New());
  } catch (...) {
    return nullptr;
  }
}

void kolo_handle_done(int status, const char* message, void* handle) {
  if (handle == nullptr) return;
  try {
    StateOf(static_cast<kolo_handle*>(handle))
        ->Complete(kolo::Status(static_cast<kolo::StatusCode>(status), message ? message : ""));
  } catch (...) {
    StateOf(static_cast<kolo_handle*>(handle))
        ->Complete(kolo::Status(static_cast<kolo::StatusCode>(status), ""));
  }
}

int kolo_poll(const kolo_handle* handle) {
  return handle == nullptr || StateOf(handle)->done() ? 1 : 0;
}

int kolo_synchronize(kolo_handle* handle, double timeout_seconds) {
  return Guarded("kolo_synchronize", [&] {
    if (handle == nullptr) return Missing("kolo_synchronize");
    const kolo::Handle h = kolo::internal::HandleAccess::Of(StateOf(handle));
    return Report(timeout_seconds < 0 ? h.Synchronize() : h.Synchronize(timeout_seconds));
  });
}

void kolo_handle_free(kolo_handle* handle) {
  if (handle != nullptr) StateOf(handle)->Unref();
}

int kolo_join(int* last_rank) {
  return Guarded("kolo_join", [&] {
    kolo::StatusOr<int> last = kolo::join();
    if (last.ok() && last_rank != nullptr) *last_rank = *last;
    return Report(last.status());
  });
}

int kolo_join_async(int* last_rank, kolo_done_fn done, void* user) {
  return Guarded("kolo_join_async", [&] {
    if (done == nullptr) return Missing("kolo_join_async");
    return Report(kolo::join_async(last_rank, Done(done, user)));
  });
}

int kolo_add_process_set(const int* ranks, int count, int* id) {
  return Guarded("kolo_add_process_set", [&] {
    if (count < 0 || (ranks == nullptr && count > 0)) return Missing("kolo_add_process_set");
    std::vector<int> list(ranks, ranks + count);
    kolo::StatusOr<int> added = kolo::add_process_set(list);
    if (added.ok() && id != nullptr) *id = *added;
    return Report(added.status());
  });
}

int kolo_remove_process_set(int id) {
  return Guarded("kolo_remove_process_set", [&] { return Report(kolo::remove_process_set(id)); });
}

int kolo_set_process_set(int id) {
  return kolo::internal::SetCurrentProcessSet(id);
}

int kolo_process_set_rank(int id) {
  return GuardedValue(-1, [&] { return kolo::process_set_rank(id); });
}

int kolo_process_set_size(int id) {
  return GuardedValue(-1, [&] { return kolo::process_set_size(id); });
}

}  // extern "C"
