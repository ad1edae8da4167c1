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
}

}  // namespace
}  // namespace kolo::controller
