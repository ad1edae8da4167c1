// The process-wide default runtime behind kolo's free functions.
#include <mutex>

#include "kolo/kolo.h"

namespace kolo {
namespace {

std::mutex& DefaultMutex() {
  static std::mutex mu;
  return mu;
}

// Guarded by DefaultMutex() for creation and destruction. Ops read it without the lock:
// calling an op concurrently with shutdown() is a usage error, as in every runtime of this kind.
std::unique_ptr<Runtime>& DefaultRuntime() {
  static std::unique_ptr<Runtime> runtime;
  return runtime;
}

Status NotInitialized() {
  return FailedPrecondition("kolo is not initialized: call kolo::init() first");
}

}  // namespace

Status init() {
  StatusOr<Options> options = Options::FromEnvironment();
  if (!options.ok()) return options.status().WithContext("kolo::init()");
  return init(*options);
}

Status init(const Options& options) {
  std::lock_guard<std::mutex> lock(DefaultMutex());
  if (DefaultRuntime()) return FailedPrecondition("kolo is already initialized");
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(options);
  if (!runtime.ok()) return runtime.status();
  DefaultRuntime() = std::move(runtime).value();
  return Status::Ok();
}

Status shutdown() {
  std::lock_guard<std::mutex> lock(DefaultMutex());
  if (!DefaultRuntime()) return Status::Ok();
  Status status = DefaultRuntime()->Shutdown();
  DefaultRuntime().reset();
  return status;
}

bool is_initialized() {
  return DefaultRuntime() != nullptr;
}

int rank() {
  return DefaultRuntime() ? DefaultRuntime()->rank() : -1;
}
int size() {
  return DefaultRuntime() ? DefaultRuntime()->size() : -1;
}
int local_rank() {
  return DefaultRuntime() ? DefaultRuntime()->local_rank() : -1;
}
int local_size() {
  return DefaultRuntime() ? DefaultRuntime()->local_size() : -1;
}
int cross_rank() {
  return DefaultRuntime() ? DefaultRuntime()->cross_rank() : -1;
}
int cross_size() {
  return DefaultRuntime() ? DefaultRuntime()->cross_size() : -1;
}

Status allreduce_async(const std::string& name, const TensorView& input, const TensorView& output,
                       const AllreduceOptions& options, Callback callback) {
  if (!DefaultRuntime()) return NotInitialized();
  return DefaultRuntime()->AllreduceAsync(name, input, output, options, std::move(callback));
}

Status allreduce(const std::string& name, const TensorView& input, const TensorView& output,
                 const AllreduceOptions& options) {
  if (!DefaultRuntime()) return NotInitialized();
  return DefaultRuntime()->Allreduce(name, input, output, options);
}

}  // namespace kolo
