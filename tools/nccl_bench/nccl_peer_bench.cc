// nccl-peer-bench: the peer kolo's GPU path is measured against (docs/PERFORMANCE.md, "On a
// real GPU"). The same NCCL allreduce kolo-bench --device cuda makes through the runtime, made
// here directly on one GPU with one rank: out of place, float sum, each call followed by a
// stream synchronize and timed on the host clock, as kolo-bench times an op from enqueue to
// callback. Also the host<->device copy bandwidth of pinned memory (what the staged path,
// KOLO_GPU_OPERATIONS=ring, is bounded by), and with --model resnet50 the model's gradients as
// one NCCL call per tensor against one call on their concatenation.
//
// A peer benchmark, like ../shared/bench's MPI programs: it talks to CUDA and NCCL directly,
// the one place outside ops/cuda and ops/nccl that does, because kolo's seam is what it measures.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/bench/model_gradients.h"

namespace {

#define CUDA_OR_DIE(call)                                                                   \
  do {                                                                                      \
    cudaError_t err_ = (call);                                                              \
    if (err_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "nccl-peer-bench: %s: %s (%s)\n", #call, cudaGetErrorName(err_), \
                   cudaGetErrorString(err_));                                               \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

#define NCCL_OR_DIE(call)                                                                 \
  do {                                                                                    \
    ncclResult_t res_ = (call);                                                           \
    if (res_ != ncclSuccess) {                                                            \
      std::fprintf(stderr, "nccl-peer-bench: %s: %s\n", #call, ncclGetErrorString(res_)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

using Clock = std::chrono::steady_clock;

struct Flags {
  size_t min_bytes = 4 << 10;
  size_t max_bytes = size_t{1} << 30;
  size_t factor = 4;
  int iters = 20;
  int warmup = 5;
  std::string model;
};

bool ParseSize(const char* text, size_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return false;
  size_t scale = 1;
  if (*end == 'K') scale = size_t{1} << 10;
  if (*end == 'M') scale = size_t{1} << 20;
  if (*end == 'G') scale = size_t{1} << 30;
  if (scale != 1) ++end;
  *out = static_cast<size_t>(v) * scale;
  return *end == '\0';
}

// Every flag takes a value: the arguments come in (flag, value) pairs.
bool ParseFlag(const std::string& flag, const char* value, Flags* f) {
  size_t n = 0;
  if (flag == "-b") return ParseSize(value, &f->min_bytes);
  if (flag == "-e") return ParseSize(value, &f->max_bytes);
  if (flag == "--model") {
    f->model = value;
    return true;
  }
  if (!ParseSize(value, &n)) return false;
  if (flag == "-f" && n >= 2) {
    f->factor = n;
  } else if (flag == "-n" && n >= 1) {
    f->iters = static_cast<int>(n);
  } else if (flag == "-w") {
    f->warmup = static_cast<int>(n);
  } else {
    return false;
  }
  return true;
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  if (argc % 2 != 1) return false;  // a flag without its value
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!ParseFlag(argv[i], argv[i + 1], f)) return false;
  }
  return f->min_bytes >= 4 && f->min_bytes <= f->max_bytes;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Runs `body` warmup + iters times; returns the timed iterations in microseconds.
template <typename Body>
std::vector<double> Time(const Flags& f, cudaStream_t stream, Body body) {
  std::vector<double> us;
  for (int i = 0; i < f.warmup + f.iters; ++i) {
    const Clock::time_point start = Clock::now();
    body();
    CUDA_OR_DIE(cudaStreamSynchronize(stream));
    const double t = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (i >= f.warmup) us.push_back(t);
  }
  return us;
}

// Fills `count` floats of device memory with 1..count (mod 1024), the values checked after.
void FillPattern(float* dev, float* host, size_t count) {
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i % 1024);
  CUDA_OR_DIE(cudaMemcpy(dev, host, count * sizeof(float), cudaMemcpyHostToDevice));
}

// A one-rank sum is its input: counts the output's elements that are not.
size_t CountWrong(const float* dev, float* host, size_t count) {
  CUDA_OR_DIE(cudaMemcpy(host, dev, count * sizeof(float), cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] != static_cast<float>(i % 1024);
  return wrong;
}

int Sweep(const Flags& f, ncclComm_t comm, cudaStream_t stream, float* in, float* out,
          float* pinned) {
  std::printf("# %10s  %12s  %12s  %10s  %10s  %10s  %6s\n", "size (B)", "median (us)", "mean (us)",
              "algbw GB/s", "h2d GB/s", "d2h GB/s", "#wrong");
  size_t total_wrong = 0;
  for (size_t bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= f.factor) {
    const size_t count = bytes / sizeof(float);
    FillPattern(in, pinned, count);
    std::vector<double> ar = Time(f, stream, [&] {
      NCCL_OR_DIE(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, stream));
    });
    const size_t wrong = CountWrong(out, pinned, count);
    total_wrong += wrong;
    std::vector<double> h2d = Time(f, stream, [&] {
      CUDA_OR_DIE(cudaMemcpyAsync(in, pinned, bytes, cudaMemcpyHostToDevice, stream));
    });
    std::vector<double> d2h = Time(f, stream, [&] {
      CUDA_OR_DIE(cudaMemcpyAsync(pinned, out, bytes, cudaMemcpyDeviceToHost, stream));
    });
    auto gbs = [&](double us) { return static_cast<double>(bytes) / us / 1e3; };
    const double t = Median(ar);
    std::printf("  %10zu  %12.1f  %12.1f  %10.2f  %10.2f  %10.2f  %6zu\n", bytes, t, Mean(ar),
                gbs(t), gbs(Median(h2d)), gbs(Median(d2h)), wrong);
    if (bytes > f.max_bytes / f.factor) break;
  }
  std::printf("# Wrong elements: %zu %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
  return total_wrong == 0 ? 0 : 1;
}

// The model's gradients: one ncclAllReduce per tensor (last layer first, back to back on the
// stream, one synchronize), against one ncclAllReduce of all of them at once.
int Model(const Flags& f, ncclComm_t comm, cudaStream_t stream, float* in, float* out,
          float* pinned) {
  kolo::StatusOr<std::vector<kolo::bench::ModelTensor>> tensors =
      kolo::bench::ModelGradients(f.model);
  if (!tensors.ok()) {
    std::fprintf(stderr, "nccl-peer-bench: %s\n", tensors.status().message().c_str());
    return 2;
  }
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const kolo::bench::ModelTensor& t : *tensors) {
    offsets.push_back(total);
    total += static_cast<size_t>(t.elements);
  }
  FillPattern(in, pinned, total);
  std::vector<double> per_tensor = Time(f, stream, [&] {
    for (size_t i = tensors->size(); i-- > 0;) {
      NCCL_OR_DIE(ncclAllReduce(in + offsets[i], out + offsets[i],
                                static_cast<size_t>((*tensors)[i].elements), ncclFloat32, ncclSum,
                                comm, stream));
    }
  });
  size_t wrong = CountWrong(out, pinned, total);
  std::vector<double> one = Time(f, stream, [&] {
    NCCL_OR_DIE(ncclAllReduce(in, out, total, ncclFloat32, ncclSum, comm, stream));
  });
  wrong += CountWrong(out, pinned, total);
  std::printf("# %s gradients: %zu tensors, %zu float32\n", f.model.c_str(), tensors->size(),
              total);
  std::printf("# %-28s  %12s  %12s\n", "mode", "median (us)", "mean (us)");
  std::printf("  %-28s  %12.1f  %12.1f\n", "one ncclAllReduce per tensor", Median(per_tensor),
              Mean(per_tensor));
  std::printf("  %-28s  %12.1f  %12.1f\n", "one ncclAllReduce, one buffer", Median(one), Mean(one));
  std::printf("# Wrong elements: %zu %s\n", wrong, wrong == 0 ? "OK" : "FAILED");
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) {
    std::fprintf(stderr,
                 "usage: nccl-peer-bench [-b SIZE] [-e SIZE] [-f FACTOR] [-n ITERS] [-w WARMUP] "
                 "[--model resnet50]\n");
    return 2;
  }
  int version = 0;
  NCCL_OR_DIE(ncclGetVersion(&version));
  CUDA_OR_DIE(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_OR_DIE(cudaGetDeviceProperties(&prop, 0));
  ncclComm_t comm = nullptr;
  int devices[1] = {0};
  NCCL_OR_DIE(ncclCommInitAll(&comm, 1, devices));
  cudaStream_t stream = nullptr;
  CUDA_OR_DIE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  size_t bytes = f.max_bytes;
  if (!f.model.empty()) bytes = size_t{128} << 20;  // ResNet-50: 97.5 MiB
  float *in = nullptr, *out = nullptr, *pinned = nullptr;
  CUDA_OR_DIE(cudaMalloc(&in, bytes));
  CUDA_OR_DIE(cudaMalloc(&out, bytes));
  CUDA_OR_DIE(cudaMallocHost(&pinned, bytes));
  std::printf(
      "# nccl-peer-bench: NCCL %d on %s, one rank, float sum out of place, %d iterations "
      "after %d (time: host clock, call to stream synchronized)\n",
      version, prop.name, f.iters, f.warmup);
  const int code = f.model.empty() ? Sweep(f, comm, stream, in, out, pinned)
                                   : Model(f, comm, stream, in, out, pinned);
  CUDA_OR_DIE(cudaFreeHost(pinned));
  CUDA_OR_DIE(cudaFree(out));
  CUDA_OR_DIE(cudaFree(in));
  NCCL_OR_DIE(ncclCommDestroy(comm));
  CUDA_OR_DIE(cudaStreamDestroy(stream));
  return code;
}
