// Fused, asynchronous averaging of named tensors through kolo; see gradient_averager.h.
#include "examples/digits/gradient_averager.h"

#include <condition_variable>
#include <memory>
#include <mutex>

#include "kolo/kolo.h"

namespace kolo::examples {
namespace {

// Shared with the callbacks, which may outlive Average() after a timeout.
struct Pending {
  std::mutex mu;
  std::condition_variable done;
  int outstanding = 0;  // guarded by mu
  Status first_error;   // guarded by mu
};

}  // namespace

Status GradientAverager::Average(std::vector<NamedTensor>* tensors) const {
  auto pending = std::make_shared<Pending>();
  AllreduceOptions options;
  options.op = ReduceOp::kAverage;
  Status enqueue_error;
  for (NamedTensor& tensor : *tensors) {
    const std::string& name = tensor.name;
    TensorView view{tensor.values.data(), DataType::kFloat32, tensor.shape, Device::Cpu()};
    {
      std::lock_guard<std::mutex> lock(pending->mu);
      ++pending->outstanding;
    }
    Status status = allreduce_async(name, view, view, options, [pending, name](const Status& s) {
      std::lock_guard<std::mutex> lock(pending->mu);
      if (!s.ok() && pending->first_error.ok()) {
        pending->first_error = s.WithContext("allreduce '" + name + "'");
      }
      if (--pending->outstanding == 0) pending->done.notify_all();
    });
    if (!status.ok()) {
      // No callback will run for this one; stop enqueuing, but wait for those in flight.
      enqueue_error = status.WithContext("allreduce_async '" + name + "'");
      std::lock_guard<std::mutex> lock(pending->mu);
      --pending->outstanding;
      break;
    }
  }
  std::unique_lock<std::mutex> lock(pending->mu);
  if (!pending->done.wait_for(lock, limit_, [&] { return pending->outstanding == 0; })) {
    return DeadlineExceeded("averaging gradients: " + std::to_string(pending->outstanding) +
                            " allreduce(s) still pending after " + std::to_string(limit_.count()) +
                            " s");
  }
  if (!enqueue_error.ok()) return enqueue_error;
  return pending->first_error;
}

}  // namespace kolo::examples
