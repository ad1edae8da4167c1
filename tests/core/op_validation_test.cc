#include "core/op_validation.h"

#include <catch2/catch.hpp>

#include "core/wire_limits.h"

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
  uint8_t b[4];
  AllreduceOptions scaled;
  scaled.prescale = 2.0;
  AllreduceOptions average;
  average.op = ReduceOp::kAverage;
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
      {"t", View(b, DataType::kBool, {4}), View(b, DataType::kBool, {4}), scaled,
       "bool tensors cannot be scaled"},
      {"t", View(b, DataType::kBool, {4}), View(b, DataType::kBool, {4}), average,
       "bool tensors have no average"},
      {"t", View(f, DataType::kFloat32, {4}), gpu, {}, "output is on cuda:0"},
      {"t", bad_device, bad_device, {}, "invalid device index -2"},
      {"t",
       View(f, static_cast<DataType>(42), {4}),
       View(f, static_cast<DataType>(42), {4}),
       {},
       "dtype(42)"},
      {"t",
       View(f, static_cast<DataType>(kNumDataTypes), {4}),
       View(f, static_cast<DataType>(kNumDataTypes), {4}),
       {},
       "dtype(11)"},
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

TEST_CASE("Every dtype is valid, bool with or and and; integers scale on the CPU",
          "[core][validation]") {
  int64_t words[4];
  for (int d = 0; d < kNumDataTypes; ++d) {
    const auto dtype = static_cast<DataType>(d);
    INFO(DataTypeName(dtype));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      AllreduceOptions options;
      options.op = op;
      CHECK(ValidateAllreduce("t", View(words, dtype, {4}), View(words, dtype, {4}), options).ok());
    }
    AllreduceOptions scaled;
    scaled.op = ReduceOp::kAverage;
    scaled.prescale = 0.5;
    scaled.postscale = 3.0;
    // Integers scale like floats on host memory (truncated); bool has neither.
    CHECK(ValidateAllreduce("t", View(words, dtype, {4}), View(words, dtype, {4}), scaled).ok() ==
          (dtype != DataType::kBool));
  }
  CHECK(DataTypeName(DataType::kUInt16) == "uint16");
  CHECK(DataTypeName(DataType::kInt16) == "int16");
  CHECK(DataTypeName(DataType::kBool) == "bool");
  CHECK(DataTypeSize(DataType::kUInt16) == 2);
  CHECK(DataTypeSize(DataType::kInt16) == 2);
  CHECK(DataTypeSize(DataType::kBool) == 1);
  CHECK(IsValidDataType(10));
  CHECK_FALSE(IsValidDataType(11));
  // The first eight keep their numbers (the wire and the C API use them).
  CHECK(static_cast<int>(DataType::kFloat64) == 7);
  CHECK(static_cast<int>(DataType::kBool) == 10);
}

TEST_CASE("Reducescatter refuses a scalar as allgather and alltoall do", "[core][validation]") {
  float x = 1;
  TensorView scalar = View(&x, DataType::kFloat32, {});
  auto rs = ValidateReducescatter("s", scalar, scalar, {}, 0, 1);
  REQUIRE_FALSE(rs.ok());
  CHECK(rs.status().code() == StatusCode::kInvalidArgument);
  CHECK(rs.status().message() ==
        "reducescatter 's': a scalar cannot be split along dimension 0; pass a tensor of shape "
        "[1]");
  auto ag = ValidateAllgather("s", scalar, [](const std::vector<int64_t>&) { return nullptr; });
  REQUIRE_FALSE(ag.ok());
  CHECK_THAT(ag.status().message(), Catch::StartsWith("allgather 's': a scalar cannot be split"));
  CHECK(ValidateReducescatter("s", View(&x, DataType::kFloat32, {1}),
                              View(&x, DataType::kFloat32, {1}), {}, 0, 1)
            .ok());
}

TEST_CASE("Reducescatter's empty part may have no memory", "[core][validation]") {
  float x[2] = {1, 2};
  // 2 rows over 4 ranks: ranks 2 and 3 receive nothing.
  const TensorView input = View(x, DataType::kFloat32, {2});
  CHECK(ValidateReducescatter("e", input, View(nullptr, DataType::kFloat32, {0}), {}, 3, 4).ok());
  // A part with rows still needs memory.
  auto missing =
      ValidateReducescatter("e", input, View(nullptr, DataType::kFloat32, {1}), {}, 0, 4);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("null data pointer"));
}

TEST_CASE("An out-of-place broadcast needs matching input and output", "[core][validation]") {
  float in[6], out[6];
  int32_t ints[6];
  auto ok = ValidateBroadcast("b", View(in, DataType::kFloat32, {6}),
                              View(out, DataType::kFloat32, {2, 3}), 1, 2);
  REQUIRE(ok.ok());
  CHECK(ok->shape == std::vector<int64_t>{2, 3});  // the output's
  CHECK(ok->root == 1);
  CHECK(ValidateBroadcast("b", View(in, DataType::kFloat32, {6}), View(in, DataType::kFloat32, {6}),
                          0, 1)
            .ok());
  struct Case {
    TensorView in, out;
    int root;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {View(in, DataType::kFloat32, {6}), View(ints, DataType::kInt32, {6}), 0,
       "broadcast 'b': input is float32 but output is int32"},
      {View(in, DataType::kFloat32, {6}), View(out, DataType::kFloat32, {5}), 0,
       "broadcast 'b': input shape [6] and output shape [5] hold different numbers of elements"},
      {View(nullptr, DataType::kFloat32, {6}), View(out, DataType::kFloat32, {6}), 0,
       "broadcast 'b': input has a null data pointer for 6 elements"},
      {View(in, DataType::kFloat32, {6}), View(out, DataType::kFloat32, {6}), 2,
       "broadcast 'b': root rank 2 is not a rank of this job of 2"},
  };
  for (const Case& c : cases) {
    auto meta = ValidateBroadcast("b", c.in, c.out, c.root, 2);
    REQUIRE_FALSE(meta.ok());
    CHECK(meta.status().code() == StatusCode::kInvalidArgument);
    CHECK(meta.status().message() == c.expect);
  }
}

// Issue 19, items 3 and 4: the checks the enqueue shares with the controller.
TEST_CASE("FirstInvalidUtf8 finds the first malformed sequence", "[core][validation]") {
  CHECK(FirstInvalidUtf8("") == -1);
  CHECK(FirstInvalidUtf8("grad/w1") == -1);
  CHECK(FirstInvalidUtf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") == -1);  // é € 😀
  CHECK(FirstInvalidUtf8("\xf4\x8f\xbf\xbf") == -1);                      // U+10FFFF
  CHECK(FirstInvalidUtf8("a\xf4\x90\x80\x80") == 1);                      // over U+10FFFF
  CHECK(FirstInvalidUtf8("ab\xe0\x80\xaf") == 2);                         // overlong
  CHECK(FirstInvalidUtf8("\xed\xbf\xbf") == 0);                           // a surrogate
  CHECK(FirstInvalidUtf8("x\x80") == 1);                                  // a continuation
  CHECK(FirstInvalidUtf8("xy\xe2\x82") == 2);                             // truncated
  CHECK(FirstInvalidUtf8("\xf8\x88\x80\x80\x80") == 0);                   // five bytes
}

TEST_CASE("DescribeOversize bounds bytes without overflowing", "[core][validation]") {
  CHECK(DescribeOversize({}, DataType::kFloat64).empty());
  CHECK(DescribeOversize({kMaxTensorBytes / 8}, DataType::kFloat64).empty());
  CHECK(DescribeOversize({kMaxTensorBytes / 8 + 1}, DataType::kFloat64) ==
        "shape [137438953473] of float64, over 1099511627776 bytes");
  CHECK(!DescribeOversize({int64_t{1} << 32, int64_t{1} << 32}, DataType::kUInt8).empty());
  CHECK(!DescribeOversize({0, int64_t{1} << 62}, DataType::kUInt8).empty());
  CHECK(DescribeOversize({0, int64_t{1} << 20}, DataType::kFloat32).empty());
}
