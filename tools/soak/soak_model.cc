#include "tools/soak/soak_model.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <type_traits>

namespace kolo::soak {
namespace {

template <typename T>
void Fill(const SoakTensor& tensor, size_t t, int rank, int64_t step, T* out) {
  for (size_t j = 0; j < tensor.count; ++j) out[j] = static_cast<T>(SoakInput(rank, t, j, step));
}

template <typename T>
size_t Check(const SoakTensor& tensor, size_t t, int size, int64_t step, const T* got,
             std::string* first_error) {
  size_t wrong = 0;
  for (size_t j = 0; j < tensor.count; ++j) {
    const T want = static_cast<T>(SoakExpected(size, tensor.op, t, j, step));
    // Average multiplies by 1/size, which rounds for a size that is not a power of two.
    const double tolerance = std::is_floating_point_v<T> ? 1e-5 * (1 + std::fabs(want)) : 0;
    if (std::fabs(static_cast<double>(got[j]) - static_cast<double>(want)) <= tolerance) continue;
    if (wrong++ == 0 && first_error->empty()) {
      *first_error = "step " + std::to_string(step) + ": '" + tensor.name + "'[" +
                     std::to_string(j) + "] is " + std::to_string(got[j]) + ", expected " +
                     std::to_string(want);
    }
  }
  return wrong;
}

}  // namespace

std::vector<SoakTensor> SoakModel(int n) {
  std::vector<SoakTensor> model;
  for (int i = 0; i < n; ++i) {
    SoakTensor t;
    t.name = "soak/layer" + std::to_string(i);
    if (i % 20 == 0) {
      t.count = size_t{256} << 10;
    } else if (i % 5 == 0) {
      t.count = 16411;
    } else {
      t.count = 1 + (static_cast<size_t>(i) * 389) % 2003;
    }
    if (i % 7 == 3) {
      t.dtype = DataType::kInt32;
    } else if (i % 11 == 5) {
      t.dtype = DataType::kFloat64;
    }
    if (i % 3 == 1 && t.dtype != DataType::kInt32) t.op = ReduceOp::kAverage;
    model.push_back(t);
  }
  return model;
}

double SoakInput(int rank, size_t t, size_t j, int64_t step) {
  return static_cast<double>((rank + 1) * static_cast<int64_t>((j + t + step) % 13));
}

double SoakExpected(int size, ReduceOp op, size_t t, size_t j, int64_t step) {
  // sum over ranks of (rank + 1) * k = k * size * (size + 1) / 2; average divides by size.
  const double k = static_cast<double>((j + t + step) % 13);
  const double sum = k * size * (size + 1) / 2;
  return op == ReduceOp::kAverage ? sum / size : sum;
}

void FillSoakInput(const SoakTensor& tensor, size_t t, int rank, int64_t step, void* data) {
  switch (tensor.dtype) {
    case DataType::kInt32:
      return Fill(tensor, t, rank, step, static_cast<int32_t*>(data));
    case DataType::kFloat64:
      return Fill(tensor, t, rank, step, static_cast<double*>(data));
    default:
      return Fill(tensor, t, rank, step, static_cast<float*>(data));
  }
}

size_t CheckSoakResult(const SoakTensor& tensor, size_t t, int size, int64_t step, const void* data,
                       std::string* first_error) {
  switch (tensor.dtype) {
    case DataType::kInt32:
      return Check(tensor, t, size, step, static_cast<const int32_t*>(data), first_error);
    case DataType::kFloat64:
      return Check(tensor, t, size, step, static_cast<const double*>(data), first_error);
    default:
      return Check(tensor, t, size, step, static_cast<const float*>(data), first_error);
  }
}

int64_t ResidentKiB() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long total = 0, resident = 0;
  const int read = std::fscanf(f, "%lld %lld", &total, &resident);
  std::fclose(f);
  if (read != 2) return 0;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace kolo::soak
