#include "controller/fusion_planner.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using testing::Meta;

// A successful float32 allreduce of `elements` elements (4 bytes each).
ReadyTensor Ok(const std::string& name, int64_t elements, uint32_t cache_id = 0) {
  return ReadyTensor{Meta(name, {elements}), "", cache_id};
}

ReadyTensor Failed(const std::string& name, const std::string& error) {
  return ReadyTensor{Meta(name), error, 0};
}

std::vector<std::vector<std::string>> Groups(const std::vector<Response>& responses) {
  std::vector<std::vector<std::string>> groups;
  for (const Response& r : responses) groups.push_back(r.names);
  return groups;
}

using Groups_t = std::vector<std::vector<std::string>>;

TEST_CASE("Tensors fuse up to the threshold inclusive", "[controller][fusion]") {
  uint64_t seq = 1;
  // 10 + 6 elements = 64 bytes.
  std::vector<ReadyTensor> ready = {Ok("a", 10), Ok("b", 6), Ok("c", 1)};
  SECTION("exactly at the threshold") {
    CHECK(Groups(PlanResponses(ready, 64, &seq)) == Groups_t{{"a", "b"}, {"c"}});
  }
  SECTION("one byte under") {
    CHECK(Groups(PlanResponses(ready, 63, &seq)) == Groups_t{{"a"}, {"b", "c"}});
  }
  SECTION("large threshold") {
    CHECK(Groups(PlanResponses(ready, 1 << 20, &seq)) == Groups_t{{"a", "b", "c"}});
  }
  SECTION("threshold 0 sends non-empty tensors alone") {
    CHECK(Groups(PlanResponses(ready, 0, &seq)) == Groups_t{{"a"}, {"b"}, {"c"}});
  }
}

TEST_CASE("A tensor bigger than the threshold goes alone", "[controller][fusion]") {
  uint64_t seq = 1;
  std::vector<ReadyTensor> ready = {Ok("small", 1), Ok("huge", 1000), Ok("empty", 0),
                                    Ok("tail", 1)};
  CHECK(Groups(PlanResponses(ready, 16, &seq)) == Groups_t{{"small"}, {"huge"}, {"empty", "tail"}});
}

TEST_CASE("Any difference in the fusion key breaks a run", "[controller][fusion]") {
  uint64_t seq = 1;
  ReadyTensor b = Ok("b", 1);
  SECTION("dtype") {
    b.meta.dtype = DataType::kFloat64;
  }
  SECTION("device") {
    b.meta.device = Device::Cuda(0);
  }
  SECTION("reduce op") {
    b.meta.reduce_op = ReduceOp::kAverage;
  }
  SECTION("prescale") {
    b.meta.prescale = 2.0;
  }
  SECTION("postscale") {
    b.meta.postscale = 0.5;
  }
  std::vector<ReadyTensor> ready = {Ok("a", 1), b, Ok("c", 1)};
  CHECK(Groups(PlanResponses(ready, 1 << 20, &seq)) == Groups_t{{"a"}, {"b"}, {"c"}});
}

TEST_CASE("GPU tensors fuse with GPU tensors and their responses say GPU", "[controller][fusion]") {
  uint64_t seq = 1;
  std::vector<ReadyTensor> ready = {Ok("a", 1), Ok("b", 1), Ok("c", 1)};
  ready[0].meta.device = Device::Cuda(0);
  ready[1].meta.device = Device::Cuda(3);  // ranks' indices differ; fusion sees CPU or GPU
  std::vector<Response> responses = PlanResponses(ready, 1 << 20, &seq);
  CHECK(Groups(responses) == Groups_t{{"a", "b"}, {"c"}});
  CHECK(responses.at(0).gpu);
  CHECK_FALSE(responses.at(1).gpu);
}

TEST_CASE("Broadcasts never fuse; error responses stand alone", "[controller][fusion]") {
  uint64_t seq = 1;
  ReadyTensor bcast1 = Ok("bcast1", 1);
  bcast1.meta.op = OpType::kBroadcast;
  bcast1.meta.root = 1;
  ReadyTensor bcast2 = bcast1;
  bcast2.meta.name = "bcast2";
  std::vector<ReadyTensor> ready = {
      Ok("a", 1), bcast1, bcast2, Ok("b", 1), Failed("bad", "Mismatched ..."), Ok("c", 1)};
  std::vector<Response> responses = PlanResponses(ready, 1 << 20, &seq);
  CHECK(Groups(responses) == Groups_t{{"a"}, {"bcast1"}, {"bcast2"}, {"b"}, {"bad"}, {"c"}});
  CHECK(responses[1].op == OpType::kBroadcast);
  CHECK(responses[1].root == 1);
  CHECK(responses[4].error == "Mismatched ...");
  CHECK(responses[4].cache_ids == std::vector<uint32_t>{0});
  CHECK(responses[4].num_elements == std::vector<int64_t>{0});
}

// A successful float32 allgather of rows of `row` elements; `first_dims` by rank.
ReadyTensor Gathered(const std::string& name, std::vector<int64_t> first_dims, int64_t row = 1) {
  ReadyTensor t = Ok(name, first_dims.at(0) * row);
  t.meta.op = OpType::kAllgather;
  t.meta.shape = {first_dims.at(0), row};
  t.first_dims = std::move(first_dims);
  return t;
}

ReadyTensor Scattered(const std::string& name, int64_t elements) {
  ReadyTensor t = Ok(name, elements);
  t.meta.op = OpType::kReducescatter;
  return t;
}

TEST_CASE("Allgathers fuse by their gathered bytes, one first_dims row per tensor",
          "[controller][fusion]") {
  uint64_t seq = 1;
  // Gathered sizes: a = (1+3) rows of 2 floats = 32 B, b = (2+0) rows of 1 = 8 B, c = 4 B.
  std::vector<ReadyTensor> ready = {Gathered("a", {1, 3}, 2), Gathered("b", {2, 0}),
                                    Gathered("c", {0, 1})};
  SECTION("under the threshold all three fuse") {
    std::vector<Response> responses = PlanResponses(ready, 44, &seq);
    REQUIRE(Groups(responses) == Groups_t{{"a", "b", "c"}});
    CHECK(responses[0].op == OpType::kAllgather);
    CHECK(responses[0].first_dims == std::vector<int64_t>{1, 3, 2, 0, 0, 1});
    CHECK(responses[0].num_elements == std::vector<int64_t>{2, 2, 0});
  }
  SECTION("the threshold counts the gathered output, not the local input") {
    // a's local input is 8 B, its output 32 B.
    CHECK(Groups(PlanResponses(ready, 39, &seq)) == Groups_t{{"a"}, {"b", "c"}});
  }
  SECTION("a dtype change breaks the run") {
    ready[1].meta.dtype = DataType::kInt32;
    CHECK(Groups(PlanResponses(ready, 1 << 20, &seq)) == Groups_t{{"a"}, {"b"}, {"c"}});
  }
}

TEST_CASE("Reducescatters fuse with reducescatters only", "[controller][fusion]") {
  uint64_t seq = 1;
  ReadyTensor avg = Scattered("avg", 4);
  avg.meta.reduce_op = ReduceOp::kAverage;
  std::vector<ReadyTensor> ready = {Scattered("r1", 5),     Scattered("r2", 3), Ok("ar", 2),
                                    Gathered("ag", {1, 1}), Scattered("r3", 1), avg};
  std::vector<Response> responses = PlanResponses(ready, 1 << 20, &seq);
  CHECK(Groups(responses) == Groups_t{{"r1", "r2"}, {"ar"}, {"ag"}, {"r3"}, {"avg"}});
  CHECK(responses[0].op == OpType::kReducescatter);
  CHECK(responses[0].first_dims.empty());
}

TEST_CASE("Responses carry the key, cache ids and sizes, and consecutive sequence numbers",
          "[controller][fusion]") {
  uint64_t seq = 7;
  ReadyTensor a = Ok("a", 3, 5);
  ReadyTensor b = Ok("b", 2, 0);
  for (ReadyTensor* t : {&a, &b}) {
    t->meta.reduce_op = ReduceOp::kAverage;
    t->meta.prescale = 0.5;
    t->meta.postscale = 2.0;
  }
  std::vector<Response> first = PlanResponses({a, b, Ok("c", 1)}, 1 << 20, &seq);
  REQUIRE(first.size() == 2);
  CHECK(first[0].seq == 7);
  CHECK(first[1].seq == 8);
  CHECK(first[0].names == std::vector<std::string>{"a", "b"});
  CHECK(first[0].cache_ids == std::vector<uint32_t>{5, 0});
  CHECK(first[0].num_elements == std::vector<int64_t>{3, 2});
  CHECK(first[0].reduce_op == ReduceOp::kAverage);
  CHECK(first[0].prescale == 0.5);
  CHECK(first[0].postscale == 2.0);
  CHECK(first[0].dtype == DataType::kFloat32);
  CHECK_FALSE(first[0].is_error());
  CHECK(seq == 9);

  std::vector<Response> second = PlanResponses({Ok("d", 1)}, 1 << 20, &seq);
  CHECK(second.at(0).seq == 9);
  CHECK(PlanResponses({}, 1 << 20, &seq).empty());
  CHECK(seq == 10);
}

// TensorBytes itself: tests/core/fusion_test.cc.
TEST_CASE("Fusion sizes count bytes, not elements", "[controller][fusion]") {
  uint64_t seq = 1;
  ReadyTensor halfs = ReadyTensor{Meta("h1", {8}, DataType::kFloat16), "", 0};
  ReadyTensor halfs2 = ReadyTensor{Meta("h2", {8}, DataType::kFloat16), "", 0};
  CHECK(Groups(PlanResponses({halfs, halfs2}, 32, &seq)) == Groups_t{{"h1", "h2"}});
}

TEST_CASE("A group is one response per dtype whatever the threshold; the rest as before",
          "[controller][fusion]") {
  uint64_t seq = 1;
  auto member = [](const std::string& name, DataType dtype, int64_t elements) {
    ReadyTensor t = Ok(name, elements);
    t.meta.dtype = dtype;
    t.meta.group = "g1,g2,g3,g4";
    t.meta.group_size = 4;
    return t;
  };
  std::vector<ReadyTensor> ready = {Ok("before", 1),
                                    member("g1", DataType::kFloat32, 100),
                                    member("g2", DataType::kFloat64, 100),
                                    member("g3", DataType::kFloat32, 100),
                                    member("g4", DataType::kInt8, 1),
                                    Ok("after", 1)};
  std::vector<Response> responses = PlanResponses(ready, 0, &seq);
  REQUIRE(Groups(responses) == Groups_t{{"before"}, {"g1", "g3"}, {"g2"}, {"g4"}, {"after"}});
  CHECK(responses[1].dtype == DataType::kFloat32);
  CHECK(responses[2].dtype == DataType::kFloat64);
  CHECK(responses[3].dtype == DataType::kInt8);
  CHECK(responses[4].seq == 5);
  SECTION("one dtype: one response") {
    for (ReadyTensor& t : ready) t.meta.dtype = DataType::kFloat32;
    CHECK(Groups(PlanResponses(ready, 0, &seq)) ==
          Groups_t{{"before"}, {"g1", "g2", "g3", "g4"}, {"after"}});
  }
}

}  // namespace
}  // namespace kolo::controller
