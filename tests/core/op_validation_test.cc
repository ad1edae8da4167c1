#include "core/op_validation.h"

#include <catch2/catch.hpp>

using namespace kolo;

namespace {
TensorView View(void* data, DataType dtype, std::vector<int64_t> shape) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  view.shape = std::move(shape);
  return view;
}
}  // namespace

TEST_CASE("A well-formed allreduce yields its metadata", "[core][validation]") {
  float buf[6];
  AllreduceOptions options;
  options.op = ReduceOp::kAverage;
  options.postscale = 0.5;
  auto meta = ValidateAllreduce("grad/w1", View(buf, DataType::kFloat32, {2, 3}),
                                View(buf, DataType::kFloat32, {2, 3}), options);
  REQUIRE(meta.ok());
  CHECK(meta->name == "grad/w1");
  CHECK(meta->shape == std::vector<int64_t>{2, 3});
  CHECK(meta->reduce_op == ReduceOp::kAverage);
  CHECK(meta->postscale == 0.5);
}

TEST_CASE("Zero-element tensors may have a null pointer", "[core][validation]") {
  auto meta = ValidateAllreduce("empty", View(nullptr, DataType::kInt8, {0, 4}),
                                View(nullptr, DataType::kInt8, {0, 4}), {});
  CHECK(meta.ok());
}

TEST_CASE("Local argument errors name the tensor and the problem", "[core][validation]") {
  float f[4];
  int32_t i[4];
  AllreduceOptions scaled;
  scaled.prescale = 2.0;
  TensorView gpu = View(f, DataType::kFloat32, {4});
  gpu.device = Device::Cuda(0);
  TensorView bad_device = gpu;
  bad_device.device.index = -2;
  struct Case {
    std::string name;
    TensorView in, out;
    AllreduceOptions options;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"", View(f, DataType::kFloat32, {4}), View(f, DataType::kFloat32, {4}), {}, "non-empty"},
      {"t", View(f, DataType::kFloat32, {4}), View(i, DataType::kInt32, {4}), {}, "int32"},
      {"t", View(f, DataType::kFloat32, {4}), View(f, DataType::kFloat32, {2}), {}, "[4]"},
      {"t", View(nullptr, DataType::kFloat32, {4}), View(f, DataType::kFloat32, {4}), {}, "null"},
      {"t", View(f, DataType::kFloat32, {-1}), View(f, DataType::kFloat32, {-1}), {}, "negative"},
      {"t", View(i, DataType::kInt32, {4}), View(i, DataType::kInt32, {4}), scaled,
       "floating-point"},
      {"t", View(f, DataType::kFloat32, {4}), gpu, {}, "output is on cuda:0"},
      {"t", bad_device, bad_device, {}, "invalid device index -2"},
      {"t",
       View(f, static_cast<DataType>(42), {4}),
       View(f, static_cast<DataType>(42), {4}),
       {},
       "dtype(42)"},
  };
  for (const Case& c : cases) {
    auto meta = ValidateAllreduce(c.name, c.in, c.out, c.options);
    INFO(c.expect);
    REQUIRE_FALSE(meta.ok());
    CHECK(meta.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(meta.status().message(), Catch::Contains(c.expect));
    if (!c.name.empty()) CHECK_THAT(meta.status().message(), Catch::Contains("'t'"));
  }
}
