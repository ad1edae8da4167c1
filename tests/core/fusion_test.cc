// core/fusion: the bytes a tensor counts for under the fusion threshold, and the layouts of
// the fused buffers every executor shares (the executors' own tests run them on real data:
// tests/ops/cpu_executor_test.cc, tests/ops/gpu/gpu_executor_test.cc).
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/fusion/fusion_layout.h"
#include "core/fusion/fusion_rule.h"

namespace kolo {
namespace {

TensorMeta Meta(const std::string& name, std::vector<int64_t> shape,
                DataType dtype = DataType::kFloat32, OpType op = OpType::kAllreduce) {
  TensorMeta meta;
  meta.name = name;
  meta.op = op;
  meta.dtype = dtype;
  meta.shape = std::move(shape);
  return meta;
}

// An allgather entry of this rank: `rows` rows of `row` float32 elements (no data: the
// layout reads shapes only).
std::unique_ptr<TensorEntry> Rows(const std::string& name, int64_t rows, int64_t row) {
  auto entry = std::make_unique<TensorEntry>();
  entry->meta = Meta(name, {rows, row}, DataType::kFloat32, OpType::kAllgather);
  entry->input.dtype = DataType::kFloat32;
  entry->input.shape = {rows, row};
  entry->output = entry->input;
  return entry;
}

TEST_CASE("A tensor's bytes are its elements times its dtype's size", "[core][fusion]") {
  CHECK(TensorBytes(Meta("a", {2, 3}, DataType::kFloat64)) == 48);
  CHECK(TensorBytes(Meta("b", {}, DataType::kUInt8)) == 1);
  CHECK(TensorBytes(Meta("c", {0, 7})) == 0);
}

TEST_CASE("An allgather counts its gathered output; the other ops their tensor", "[core][fusion]") {
  const TensorMeta gathered = Meta("g", {2, 3}, DataType::kFloat32, OpType::kAllgather);
  CHECK(FusionBytes(gathered, {2, 5, 0}) == 7 * 3 * 4);
  CHECK(FusionBytes(gathered, {0, 0}) == 0);
  CHECK(FusionBytes(Meta("r", {4, 3}, DataType::kFloat16, OpType::kReducescatter), {}) == 24);
  CHECK(FusionBytes(Meta("a", {5}), {9, 9}) == 20);  // first_dims mean nothing to an allreduce
}

TEST_CASE("A fused allgather's buffer is rank-major and its total is what the planner counted",
          "[core][fusion]") {
  // Three ranks, this one rank 1. Tensor a: rows of 2 floats (8 bytes), 1, 2 and 0 rows from
  // ranks 0..2; tensor b: rows of 1 float, 3, 0 and 1 rows.
  const auto a = Rows("a", 2, 2);
  const auto b = Rows("b", 0, 1);
  Response response;
  response.op = OpType::kAllgather;
  response.first_dims = {1, 2, 0, 3, 0, 1};
  StatusOr<AllgatherLayout> layout = AllgatherLayout::Of(response, {a.get(), b.get()}, 1, 3);
  REQUIRE(layout.ok());
  CHECK(layout->tensors() == 2);
  CHECK(layout->block_bytes() == std::vector<size_t>{8 + 12, 16 + 0, 0 + 4});
  CHECK(layout->total_bytes() == 40);
  CHECK(layout->own_offset() == 20);
  CHECK(static_cast<int64_t>(layout->total_bytes()) ==
        FusionBytes(a->meta, {1, 2, 0}) + FusionBytes(b->meta, {3, 0, 1}));
  CHECK(layout->output_shape(0) == std::vector<int64_t>{3, 2});
  CHECK(layout->output_shape(1) == std::vector<int64_t>{4, 1});
  struct Want {
    size_t t;
    int r;
    size_t buffer_offset, output_offset, bytes;
  };
  // Rank 0's block: a's row, b's rows; rank 1's: a's rows (b sends none); rank 2's: b's row.
  for (const Want& w : {Want{0, 0, 0, 0, 8}, Want{1, 0, 8, 0, 12}, Want{0, 1, 20, 8, 16},
                        Want{1, 1, 36, 12, 0}, Want{0, 2, 36, 24, 0}, Want{1, 2, 36, 12, 4}}) {
    INFO("tensor " << w.t << ", rank " << w.r);
    const AllgatherLayout::Piece& piece = layout->piece(w.t, w.r);
    CHECK(piece.buffer_offset == w.buffer_offset);
    CHECK(piece.output_offset == w.output_offset);
    CHECK(piece.bytes == w.bytes);
  }
}

TEST_CASE("An allgather layout refuses entries that do not match the response", "[core][fusion]") {
  const auto a = Rows("a", 2, 2);
  const auto b = Rows("b", 1, 1);
  // The layout of a and b on rank 0 of 2 under `first_dims` and `dtype`: its error.
  auto refusal = [&](std::vector<int64_t> first_dims, DataType dtype = DataType::kFloat32) {
    Response response;
    response.op = OpType::kAllgather;
    response.dtype = dtype;
    response.first_dims = std::move(first_dims);
    return AllgatherLayout::Of(response, {a.get(), b.get()}, 0, 2).status();
  };
  REQUIRE(refusal({2, 2, 1, 1}).ok());
  const Status rows = refusal({2, 2, 1});
  CHECK(rows.code() == StatusCode::kInternal);
  CHECK(rows.message() == "expected 2 first dimensions for each of 2 tensors, got 3");
  const Status mine = refusal({2, 2, 3, 1});
  CHECK(mine.code() == StatusCode::kInternal);
  CHECK(mine.message() == "this rank's input 'b' does not match the decision");
  CHECK(refusal({2, 2, 1, 1}, DataType::kInt32).code() == StatusCode::kInternal);
}

TEST_CASE("A fused reducescatter gives each rank whole rows of every tensor", "[core][fusion]") {
  // 5 rows of 2 over 2 ranks: 3 and 2 rows; 1 row of 3: 1 and 0 rows. This rank is rank 1.
  auto a = Rows("a", 5, 2);
  a->output.shape = {2, 2};
  auto b = Rows("b", 1, 3);
  b->output.shape = {0, 3};
  StatusOr<ReducescatterLayout> layout =
      LayOutReducescatter({a.get(), b.get()}, DataType::kFloat32, 1, 2);
  REQUIRE(layout.ok());
  CHECK(layout->parts == std::vector<size_t>{6, 4, 3, 0});
  CHECK(layout->block_elements == std::vector<size_t>{9, 4});
  SECTION("an output that is not this rank's part is refused, naming it") {
    b->output.shape = {1, 3};
    StatusOr<ReducescatterLayout> wrong =
        LayOutReducescatter({a.get(), b.get()}, DataType::kFloat32, 1, 2);
    REQUIRE_FALSE(wrong.ok());
    CHECK(wrong.status().message() == "the output of 'b' does not match this rank's part");
  }
}

TEST_CASE("A fused reducescatter's buffer holds each rank's block in the order asked",
          "[core][fusion]") {
  // Parts (elements) of two tensors over three ranks: a is 4, 3, 2; b is 1, 0, 5.
  ReducescatterLayout layout;
  layout.parts = {4, 3, 2, 1, 0, 5};
  layout.block_elements = {5, 3, 7};
  REQUIRE(layout.total_elements() == 15);
  struct Want {
    size_t t;
    int r;
    size_t input_offset, buffer_offset, elements;
  };
  auto check = [](const ReducescatterPacking& packing, const std::vector<Want>& want) {
    REQUIRE(packing.pieces().size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const ReducescatterPacking::Piece& got = packing.pieces()[i];
      INFO("piece " << i);
      CHECK(got.tensor == want[i].t);
      CHECK(got.rank == want[i].r);
      CHECK(got.input_offset == want[i].input_offset);
      CHECK(got.buffer_offset == want[i].buffer_offset);
      CHECK(got.elements == want[i].elements);
      const ReducescatterPacking::Piece& same = packing.piece(want[i].t, want[i].r);
      CHECK(&same == &got);
    }
  };
  SECTION("packed in rank order: the blocks back to back") {
    const ReducescatterPacking packing = ReducescatterPacking::Packed(layout, nullptr);
    check(packing, {{0, 0, 0, 0, 4},
                    {1, 0, 0, 4, 1},
                    {0, 1, 4, 5, 3},
                    {1, 1, 1, 8, 0},
                    {0, 2, 7, 8, 2},
                    {1, 2, 1, 10, 5}});
    CHECK(packing.block_offset(0) == 0);
    CHECK(packing.block_offset(1) == 5);
    CHECK(packing.block_offset(2) == 8);
    CHECK(packing.total_elements() == 15);
  }
  SECTION("packed in another order (the hierarchical path's place-major one)") {
    const std::vector<int> order = {2, 0, 1};
    const ReducescatterPacking packing = ReducescatterPacking::Packed(layout, &order);
    check(packing, {{0, 2, 7, 0, 2},
                    {1, 2, 1, 2, 5},
                    {0, 0, 0, 7, 4},
                    {1, 0, 0, 11, 1},
                    {0, 1, 4, 12, 3},
                    {1, 1, 1, 15, 0}});
    CHECK(packing.block_offset(2) == 0);
    CHECK(packing.block_offset(0) == 7);
    CHECK(packing.block_offset(1) == 12);
    CHECK(packing.total_elements() == 15);
  }
  SECTION("padded: every block as long as the largest, in rank order") {
    const ReducescatterPacking packing = ReducescatterPacking::Padded(layout);
    check(packing, {{0, 0, 0, 0, 4},
                    {1, 0, 0, 4, 1},
                    {0, 1, 4, 7, 3},
                    {1, 1, 1, 10, 0},
                    {0, 2, 7, 14, 2},
                    {1, 2, 1, 16, 5}});
    CHECK(packing.block_offset(1) == 7);
    CHECK(packing.block_offset(2) == 14);
    CHECK(packing.total_elements() == 21);
  }
}

}  // namespace
}  // namespace kolo
