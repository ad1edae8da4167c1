#include "controller/meta_validation.h"

#include <catch2/catch.hpp>

#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using testing::Meta;

TEST_CASE("Agreeing announcements produce no mismatch", "[controller][validation]") {
  TensorMeta a = Meta("grad/w1", {2, 3});
  CHECK(DescribeMismatch(0, a, 1, a).empty());
}

TEST_CASE("Each field mismatch names the tensor, both ranks and both values",
          "[controller][validation]") {
  TensorMeta a = Meta("grad/w1", {2, 3});
  TensorMeta b = a;
  std::string expected;
  SECTION("shape") {
    b.shape = {3, 2};
    expected = "Mismatched allreduce shapes for 'grad/w1': rank 0 sent [2, 3], rank 3 sent [3, 2]";
  }
  SECTION("data type") {
    b.dtype = DataType::kInt32;
    expected = "Mismatched data types for 'grad/w1': rank 0 sent float32, rank 3 sent int32";
  }
  SECTION("reduce op") {
    b.reduce_op = ReduceOp::kMax;
    expected = "Mismatched reduce ops for 'grad/w1': rank 0 sent sum, rank 3 sent max";
  }
  SECTION("prescale") {
    b.prescale = 0.5;
    expected = "Mismatched prescale factors for 'grad/w1': rank 0 sent 1, rank 3 sent 0.5";
  }
  SECTION("postscale") {
    b.postscale = 0.1;
    expected = "Mismatched postscale factors for 'grad/w1': rank 0 sent 1, rank 3 sent 0.1";
  }
  SECTION("device") {
    b.device = Device::Cuda(1);
    expected = "Mismatched devices for 'grad/w1': rank 0 sent cpu, rank 3 sent cuda:1";
  }
  SECTION("op") {
    b.op = OpType::kBroadcast;
    expected = "Mismatched operations for 'grad/w1': rank 0 sent allreduce, rank 3 sent broadcast";
  }
  SECTION("root") {
    a.root = 0;
    b.root = 2;
    expected = "Mismatched root ranks for 'grad/w1': rank 0 sent 0, rank 3 sent 2";
  }
  CHECK(DescribeMismatch(0, a, 3, b) == expected);
}

TEST_CASE("Ranks agree on CPU or GPU, not on the GPU's index", "[controller][validation]") {
  TensorMeta a = Meta("grad/w1", {2, 3});
  TensorMeta b = a;
  a.device = Device::Cuda(0);
  b.device = Device::Cuda(1);
  CHECK(DescribeMismatch(0, a, 1, b) == "");
  b.device = Device::Cpu();
  CHECK(DescribeMismatch(0, a, 1, b) ==
        "Mismatched devices for 'grad/w1': rank 0 sent cuda:0, rank 1 sent cpu");
}

TEST_CASE("The op is reported before the shape, the dtype before the shape",
          "[controller][validation]") {
  TensorMeta a = Meta("x", {2});
  TensorMeta b = Meta("x", {3}, DataType::kFloat64);
  CHECK(DescribeMismatch(0, a, 1, b) ==
        "Mismatched data types for 'x': rank 0 sent float32, rank 1 sent float64");
  b.op = OpType::kAllgather;
  CHECK(DescribeMismatch(0, a, 1, b) ==
        "Mismatched operations for 'x': rank 0 sent allreduce, rank 1 sent allgather");
}

TEST_CASE("Scale factors print as the shortest text that reads back exactly",
          "[controller][validation]") {
  CHECK(FormatScale(1.0) == "1");
  CHECK(FormatScale(0.5) == "0.5");
  CHECK(FormatScale(0.1) == "0.1");
  CHECK(FormatScale(1.0 / 3.0) == "0.3333333333333333");
  CHECK(FormatScale(-2.0) == "-2");
  CHECK(FormatScale(1e-300) == "1e-300");
}

TEST_CASE("Malformed announcements are protocol errors naming the rank",
          "[controller][validation]") {
  CHECK(CheckWellFormed(2, Meta("x")).ok());
  CHECK(CheckWellFormed(2, Meta("scalar", {})).ok());
  CHECK(CheckWellFormed(2, Meta("empty", {0, 5})).ok());

  Status no_name = CheckWellFormed(2, Meta(""));
  CHECK(no_name.message() == "rank 2 announced a tensor without a name");

  TensorMeta bad_dtype = Meta("x");
  bad_dtype.dtype = static_cast<DataType>(42);
  CHECK(CheckWellFormed(1, bad_dtype).message() ==
        "rank 1 announced 'x' with an unknown dtype(42)");

  TensorMeta bad_op = Meta("x");
  bad_op.op = static_cast<OpType>(-1);
  CHECK(CheckWellFormed(1, bad_op).message() == "rank 1 announced 'x' with an unknown op(-1)");

  TensorMeta bad_reduce = Meta("x");
  bad_reduce.reduce_op = static_cast<ReduceOp>(9);
  CHECK(CheckWellFormed(1, bad_reduce).message() ==
        "rank 1 announced 'x' with an unknown reduce_op(9)");

  CHECK(CheckWellFormed(0, Meta("x", {2, -1})).message() ==
        "rank 0 announced 'x' with a negative dimension in [2, -1]");

  // Every dtype is known, the last (bool) included; one past it is not.
  CHECK(CheckWellFormed(1, Meta("b", {2}, DataType::kBool)).ok());
  bad_dtype.dtype = static_cast<DataType>(kNumDataTypes);
  CHECK(CheckWellFormed(1, bad_dtype).message() ==
        "rank 1 announced 'x' with an unknown dtype(11)");
  // What enqueue refuses for bool (an average, a scale factor) is a protocol error here.
  TensorMeta bool_average = Meta("b", {2}, DataType::kBool);
  bool_average.reduce_op = ReduceOp::kAverage;
  CHECK(CheckWellFormed(3, bool_average).message() ==
        "rank 3 announced 'b' with an average or a scale factor of bool, which have no meaning");
  TensorMeta bool_scaled = Meta("b", {2}, DataType::kBool);
  bool_scaled.op = OpType::kReducescatter;
  bool_scaled.postscale = 2.0;
  CHECK_FALSE(CheckWellFormed(3, bool_scaled).ok());
  TensorMeta bool_gather = Meta("b", {2}, DataType::kBool);
  bool_gather.op = OpType::kAllgather;
  bool_gather.reduce_op = ReduceOp::kAverage;  // not a reduction: the field means nothing
  CHECK(CheckWellFormed(3, bool_gather).ok());
}

// Found by fuzz/control_message_fuzzer.cc: a shape whose element count overflowed int64 was
// accepted and overflowed in num_elements(); an allgather scalar was read at shape[0].
TEST_CASE("Announcements whose sizes would overflow or that lack dimension 0 are refused",
          "[controller][validation]") {
  CHECK(CheckWellFormed(0, Meta("big", {int64_t{1} << 18, int64_t{1} << 20})).ok());  // 1 TiB
  CHECK(CheckWellFormed(0, Meta("zero", {0, kMaxTensorBytes / 4})).ok());
  CHECK(CheckWellFormed(1, Meta("x", {int64_t{1} << 40, int64_t{1} << 40, 0})).message() ==
        "rank 1 announced 'x' with shape [1099511627776, 1099511627776, 0] of float32, over "
        "1099511627776 bytes");
  CHECK(!CheckWellFormed(1, Meta("x", {int64_t{1} << 39, 2}, DataType::kFloat64)).ok());
  CHECK(!CheckWellFormed(1, Meta("x", {0, kMaxTensorBytes + 1})).ok());

  TensorMeta scalar_gather = Meta("g", {});
  scalar_gather.op = OpType::kAllgather;
  CHECK(CheckWellFormed(2, scalar_gather).message() ==
        "rank 2 announced 'g' with a scalar, which has no dimension 0 to allgather");
  TensorMeta scalar_scatter = Meta("s", {});
  scalar_scatter.op = OpType::kReducescatter;
  CHECK(CheckWellFormed(2, scalar_scatter).message() ==
        "rank 2 announced 's' with a scalar, which has no dimension 0 to reducescatter");

  TensorMeta a2a = Meta("a", {5, 2});
  a2a.op = OpType::kAlltoall;
  a2a.splits = {2, 3};
  CHECK(CheckWellFormed(0, a2a).ok());
  for (std::vector<int64_t> bad :
       {std::vector<int64_t>{2, 2}, {6, -1}, {-1, 6}, {INT64_MAX, INT64_MAX}}) {
    a2a.splits = bad;
    CHECK(CheckWellFormed(0, a2a).message() ==
          "rank 0 announced 'a' with splits " + ShapeToString(bad) + " for 5 rows");
  }
}

}  // namespace
}  // namespace kolo::controller
