// kolo's C API (kolo/kolo_c.h) over the default runtime of kolo/kolo.h. No exception crosses
// it: kolo itself does not throw, and a callback's thread boundary is kolo's own.
#include <string>

#include "kolo/kolo.h"
#include "kolo/kolo_c.h"

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

kolo::AllreduceOptions Reduce(int reduce_op) {
  kolo::AllreduceOptions options;
  options.op = static_cast<kolo::ReduceOp>(reduce_op);
  return options;
}

}  // namespace

extern "C" {

const char* kolo_last_error(void) {
  return tls_last_error.c_str();
}

int kolo_init(void) {
  return Report(kolo::init());
}
int kolo_shutdown(void) {
  return Report(kolo::shutdown());
}
int kolo_rank(void) {
  return kolo::rank();
}
int kolo_size(void) {
  return kolo::size();
}
int kolo_local_rank(void) {
  return kolo::local_rank();
}
int kolo_local_size(void) {
  return kolo::local_size();
}

int kolo_allreduce(const char* name, const void* input, void* output, int64_t count, int dtype,
                   int reduce_op) {
  if (name == nullptr) return Report(kolo::InvalidArgument("kolo_allreduce: name is NULL"));
  return Report(kolo::allreduce(name, View(input, count, dtype), View(output, count, dtype),
                                Reduce(reduce_op)));
}

int kolo_allreduce_async(const char* name, const void* input, void* output, int64_t count,
                         int dtype, int reduce_op, kolo_done_fn done, void* user) {
  if (name == nullptr || done == nullptr) {
    return Report(kolo::InvalidArgument("kolo_allreduce_async: name and done must be set"));
  }
  return Report(kolo::allreduce_async(name, View(input, count, dtype), View(output, count, dtype),
                                      Reduce(reduce_op), [done, user](const kolo::Status& s) {
                                        done(static_cast<int>(s.code()), s.message().c_str(), user);
                                      }));
}

int kolo_broadcast(const char* name, void* data, int64_t count, int dtype, int root) {
  if (name == nullptr) return Report(kolo::InvalidArgument("kolo_broadcast: name is NULL"));
  return Report(kolo::broadcast(name, View(data, count, dtype), root));
}

int kolo_barrier(void) {
  return Report(kolo::barrier());
}

}  // extern "C"
