// The README's "Using the API" example, built so that it stays true: a blocking allreduce, a
// broadcast and a barrier, and an asynchronous allreduce. Run it with `build/bin/kolorun -np 2
// build/bin/kolo-quickstart`.
#include <kolo/kolo.h>

#include <cstdio>
#include <vector>

int main() {
  kolo::Status s =
      kolo::init();  // reads KOLO_RANK, KOLO_SIZE, KOLO_CONTROLLER, ... (kolorun sets them)
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }

  std::vector<float> grad(1000, 1.0f);
  kolo::TensorView view{grad.data(), kolo::DataType::kFloat32, {1000}, kolo::Device::Cpu()};
  kolo::AllreduceOptions avg;
  avg.op = kolo::ReduceOp::kAverage;

  // Blocking:
  s = kolo::allreduce("grad/w1", view, view, avg);  // in place: input == output
  if (!s.ok()) {
    std::fprintf(stderr, "grad/w1 failed: %s\n", s.ToString().c_str());
    return 1;
  }

  // Broadcast rank 0's values to everyone (in place), then meet at a barrier.
  s = kolo::broadcast("init/weights", view, /*root=*/0);
  if (s.ok()) s = kolo::barrier();
  if (!s.ok()) {
    std::fprintf(stderr, "broadcast/barrier failed: %s\n", s.ToString().c_str());
    return 1;
  }

  std::printf("rank %d of %d: grad[0] = %g\n", kolo::rank(), kolo::size(), grad[0]);

  // Asynchronous: returns at once; the callback runs exactly once on kolo's thread. The
  // tensor is kolo's until then: do not read or write `grad` before the callback.
  s = kolo::allreduce_async("grad/w2", view, view, avg, [](const kolo::Status& st) {
    if (!st.ok()) std::fprintf(stderr, "grad/w2 failed: %s\n", st.ToString().c_str());
  });
  if (!s.ok()) return 1;
  // shutdown() waits for every rank, so grad/w2 has completed (or failed) by then.
  return kolo::shutdown().ok() ? 0 : 1;
}
