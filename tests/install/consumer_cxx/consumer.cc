// One rank through the installed C++ API: init (which checks the header version), an allreduce
// of a few floats scaled by 2, the versions, shutdown. Prints one line that install_test.sh
// checks; exits non-zero with a message on any failure.
#include <kolo/kolo.h>

#include <cstdio>
#include <vector>

int main() {
  kolo::Status s = kolo::init();
  if (!s.ok()) {
    std::fprintf(stderr, "consumer_cxx: init: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<float> values = {1.5f, 2.0f, 3.0f};
  kolo::TensorView view{values.data(), kolo::DataType::kFloat32, {3}, kolo::Device::Cpu()};
  kolo::AllreduceOptions twice;
  twice.postscale = 2.0;
  s = kolo::allreduce("consumer/values", view, view, twice);
  if (!s.ok()) {
    std::fprintf(stderr, "consumer_cxx: allreduce: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("cxx consumer: library %s headers %s rank %d of %d values %g %g %g\n",
              kolo::version(), KOLO_VERSION_STRING, kolo::rank(), kolo::size(), values[0],
              values[1], values[2]);
  s = kolo::shutdown();
  if (!s.ok()) {
    std::fprintf(stderr, "consumer_cxx: shutdown: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
