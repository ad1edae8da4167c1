#include "controller/negotiator.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "controller/stall_inspector.h"
#include "tests/controller/test_requests.h"

namespace kolo::controller {
namespace {

using testing::ById;
using testing::Full;
using testing::kT0;
using testing::Meta;

// The job's size, 1 MiB fusion, `cache_capacity` ids; the table's defaults else.
Options MakeOptions(int size, int cache_capacity = 16) {
  Options options;
  options.size = size;
  options.fusion_threshold_bytes = 1 << 20;
  options.cache_capacity = cache_capacity;
  return options;
}

// Every rank sends `requests`; returns the planned responses.
std::vector<Response> AllSend(Negotiator* n, int size, const std::vector<Request>& requests) {
  for (int rank = 0; rank < size; ++rank) REQUIRE(n->AddRequests(rank, requests, kT0).ok());
  return n->Plan();
}

TEST_CASE("A completed name gets a cache id that every rank may then use",
          "[controller][negotiator][cache]") {
  const int size = GENERATE(1, 2, 5);
  const Options options = MakeOptions(size);
  Negotiator n(options);
  std::vector<Response> first = AllSend(&n, size, {Full(Meta("a")), Full(Meta("b"))});
  REQUIRE(first.size() == 1);
  CHECK(first[0].names == std::vector<std::string>{"a", "b"});
  CHECK(first[0].cache_ids == std::vector<uint32_t>{1, 2});

  // By id alone; the same metadata (and the same ids) come back.
  std::vector<Response> second = AllSend(&n, size, {ById(2), ById(1)});
  REQUIRE(second.size() == 1);
  CHECK(second[0].names == std::vector<std::string>{"b", "a"});
  CHECK(second[0].cache_ids == std::vector<uint32_t>{2, 1});
  CHECK(second[0].num_elements == std::vector<int64_t>{4, 4});
  CHECK(second[0].seq == 2);
}

TEST_CASE("Ids and full metadata mix freely when they agree", "[controller][negotiator][cache]") {
  const Options options = MakeOptions(2);
  Negotiator n(options);
  AllSend(&n, 2, {Full(Meta("a"))});
  REQUIRE(n.AddRequests(0, {ById(1)}, kT0).ok());
  REQUIRE(n.AddRequests(1, {Full(Meta("a"))}, kT0).ok());
  std::vector<Response> responses = n.Plan();
  REQUIRE(responses.size() == 1);
  CHECK_FALSE(responses[0].is_error());
  CHECK(responses[0].cache_ids == std::vector<uint32_t>{1});
}

TEST_CASE("An unknown cache id is a protocol error naming the rank",
          "[controller][negotiator][cache]") {
  const Options options = MakeOptions(2);
  Negotiator n(options);
  Status status = n.AddRequests(1, {ById(7)}, kT0);
  CHECK(status.code() == StatusCode::kInternal);
  CHECK(status.message() == "rank 1 sent unknown cache id 7");
}

TEST_CASE("Once the cache is full, new names complete without an id",
          "[controller][negotiator][cache]") {
  const Options options = MakeOptions(2, /*cache_capacity=*/2);
  Negotiator n(options);
  std::vector<Response> r = AllSend(&n, 2, {Full(Meta("a")), Full(Meta("b")), Full(Meta("c"))});
  REQUIRE(r.size() == 1);
  CHECK(r[0].cache_ids == std::vector<uint32_t>{1, 2, 0});
  CHECK(n.cache().size() == 2);
  // c stays uncached on later steps too.
  r = AllSend(&n, 2, {Full(Meta("c"))});
  CHECK(r.at(0).cache_ids == std::vector<uint32_t>{0});
}

TEST_CASE("A shape change replaces the name's cache entry on success",
          "[controller][negotiator][cache]") {
  const Options options = MakeOptions(2);
  Negotiator n(options);
  AllSend(&n, 2, {Full(Meta("a", {4}))});
  std::vector<Response> r = AllSend(&n, 2, {Full(Meta("a", {8}))});
  CHECK(r.at(0).cache_ids == std::vector<uint32_t>{2});
  CHECK(r.at(0).num_elements == std::vector<int64_t>{8});
  CHECK(n.AddRequests(0, {ById(1)}, kT0).message() == "rank 0 sent unknown cache id 1");
}

TEST_CASE("A mismatch between an id and new metadata fails the op and keeps the cache",
          "[controller][negotiator][cache]") {
  const Options options = MakeOptions(2);
  Negotiator n(options);
  AllSend(&n, 2, {Full(Meta("a", {4}))});
  REQUIRE(n.AddRequests(0, {ById(1)}, kT0).ok());
  REQUIRE(n.AddRequests(1, {Full(Meta("a", {5}))}, kT0).ok());
  std::vector<Response> r = n.Plan();
  REQUIRE(r.size() == 1);
  CHECK(r[0].error == "Mismatched allreduce shapes for 'a': rank 0 sent [4], rank 1 sent [5]");
  CHECK(r[0].cache_ids == std::vector<uint32_t>{0});
  CHECK(n.cache().IdOf("a") == 1);
  CHECK(AllSend(&n, 2, {ById(1)}).at(0).names == std::vector<std::string>{"a"});
}

TEST_CASE("A cached allgather resolves each rank's own dimension 0",
          "[controller][negotiator][cache]") {
  const int size = 3;
  const Options options = MakeOptions(size);
  Negotiator n(options);
  auto gather = [](int64_t rows) {
    TensorMeta meta = Meta("g", {rows, 2});
    meta.op = OpType::kAllgather;
    return meta;
  };
  for (int rank = 0; rank < size; ++rank) {
    REQUIRE(n.AddRequests(rank, {Full(gather(rank + 1))}, kT0).ok());
  }
  std::vector<Response> first = n.Plan();
  REQUIRE(first.size() == 1);
  const uint32_t id = first[0].cache_ids.at(0);
  CHECK(NeedsEveryRank(id));
  CHECK(first[0].first_dims == std::vector<int64_t>{1, 2, 3});

  // By id alone: the response carries every rank's rows as agreed.
  std::vector<Response> second = AllSend(&n, size, {ById(id)});
  REQUIRE(second.size() == 1);
  CHECK_FALSE(second[0].is_error());
  CHECK(second[0].first_dims == std::vector<int64_t>{1, 2, 3});
  CHECK(second[0].cache_ids == std::vector<uint32_t>{id});

  // Rank 1's rows changed: it announces in full, the others by id; a fresh id.
  REQUIRE(n.AddRequests(0, {ById(id)}, kT0).ok());
  REQUIRE(n.AddRequests(1, {Full(gather(5))}, kT0).ok());
  REQUIRE(n.AddRequests(2, {ById(id)}, kT0).ok());
  std::vector<Response> third = n.Plan();
  REQUIRE(third.size() == 1);
  CHECK_FALSE(third[0].is_error());
  CHECK(third[0].first_dims == std::vector<int64_t>{1, 5, 3});
  CHECK(third[0].cache_ids.at(0) != id);
  CHECK(n.AddRequests(0, {ById(id)}, kT0).message() ==
        "rank 0 sent unknown cache id " + std::to_string(id));
}

TEST_CASE("A cached alltoall resolves each rank's own splits; new splits get a fresh id",
          "[controller][negotiator][cache]") {
  const int size = 2;
  const Options options = MakeOptions(size);
  Negotiator n(options);
  auto a2a = [](std::vector<int64_t> splits) {
    TensorMeta meta = Meta("a", {splits[0] + splits[1], 2});
    meta.op = OpType::kAlltoall;
    meta.splits = std::move(splits);
    return meta;
  };
  REQUIRE(n.AddRequests(0, {Full(a2a({1, 2}))}, kT0).ok());
  REQUIRE(n.AddRequests(1, {Full(a2a({3, 0}))}, kT0).ok());
  std::vector<Response> first = n.Plan();
  REQUIRE(first.size() == 1);
  const uint32_t id = first[0].cache_ids.at(0);
  CHECK(id != 0);
  CHECK(NeedsEveryRank(id));
  CHECK(first[0].splits == std::vector<int64_t>{1, 2, 3, 0});

  // By id alone: the response carries the matrix as agreed.
  std::vector<Response> second = AllSend(&n, size, {ById(id)});
  REQUIRE(second.size() == 1);
  CHECK_FALSE(second[0].is_error());
  CHECK(second[0].splits == std::vector<int64_t>{1, 2, 3, 0});
  CHECK(second[0].cache_ids == std::vector<uint32_t>{id});

  // Rank 1's splits changed: it announces in full, rank 0 by id; no id until the same splits
  // come twice in a row.
  REQUIRE(n.AddRequests(0, {ById(id)}, kT0).ok());
  REQUIRE(n.AddRequests(1, {Full(a2a({1, 1}))}, kT0).ok());
  std::vector<Response> third = n.Plan();
  REQUIRE(third.size() == 1);
  CHECK_FALSE(third[0].is_error());
  CHECK(third[0].splits == std::vector<int64_t>{1, 2, 1, 1});
  CHECK(third[0].cache_ids.at(0) == 0);
  REQUIRE(n.AddRequests(0, {Full(a2a({1, 2}))}, kT0).ok());
  REQUIRE(n.AddRequests(1, {Full(a2a({1, 1}))}, kT0).ok());
  std::vector<Response> fourth = n.Plan();
  REQUIRE(fourth.size() == 1);
  CHECK(fourth[0].cache_ids.at(0) != 0);
  CHECK(fourth[0].cache_ids.at(0) != id);
}

TEST_CASE("Malformed metadata and duplicate announcements are protocol errors",
          "[controller][negotiator]") {
  const Options options = MakeOptions(3);
  Negotiator n(options);
  CHECK(n.AddRequests(2, {Full(Meta(""))}, kT0).message() ==
        "rank 2 announced a tensor without a name");
  CHECK(n.AddRequests(1, {Full(Meta("x")), Full(Meta("x"))}, kT0).message() ==
        "rank 1 announced 'x' twice before it was ready");
}

TEST_CASE("Errors and successes keep readiness order and global sequence numbers",
          "[controller][negotiator]") {
  const Options options = MakeOptions(2);
  Negotiator n(options);
  REQUIRE(n.AddRequests(0, {Full(Meta("a")), Full(Meta("bad")), Full(Meta("b"))}, kT0).ok());
  REQUIRE(n.AddRequests(1, {Full(Meta("a")), Full(Meta("bad", {5})), Full(Meta("b"))}, kT0).ok());
  CHECK(n.ready_count() == 3);
  std::vector<Response> r = n.Plan();
  REQUIRE(r.size() == 3);
  CHECK(r[0].names == std::vector<std::string>{"a"});
  CHECK(r[1].is_error());
  CHECK(r[2].names == std::vector<std::string>{"b"});
  CHECK(r[0].seq == 1);
  CHECK(r[1].seq == 2);
  CHECK(r[2].seq == 3);
  CHECK(n.next_seq() == 4);
  CHECK(n.ready_count() == 0);
  CHECK(n.Plan().empty());
}

TEST_CASE("Shutdown notices fail pending names and count towards all_shut_down",
          "[controller][negotiator][shutdown]") {
  const Options options = MakeOptions(2);
  Negotiator n(options);
  REQUIRE(n.AddRequests(0, {Full(Meta("x"))}, kT0).ok());
  n.AddShutdown(1);
  CHECK_FALSE(n.all_shut_down());
  std::vector<Response> r = n.Plan();
  REQUIRE(r.size() == 1);
  CHECK(r[0].error == "rank 1 called shutdown() before submitting 'x'");
  n.AddShutdown(0);
  CHECK(n.all_shut_down());
}

TEST_CASE("Announcements by cache id report their steps under the tensor's name",
          "[controller][negotiator][trace]") {
  using Kind = NegotiationEvent::Kind;
  const Options options = MakeOptions(2);
  Negotiator n(options);
  AllSend(&n, 2, {Full(Meta("a"))});
  std::vector<NegotiationEvent> events;
  REQUIRE(n.AddRequests(1, {ById(1)}, kT0, &events).ok());
  REQUIRE(n.AddRequests(0, {ById(1)}, kT0, &events).ok());
  REQUIRE(events.size() == 4);
  CHECK(events[0] == NegotiationEvent{Kind::kBegin, "a", OpType::kAllreduce, -1});
  CHECK(events[1] == NegotiationEvent{Kind::kAnnounce, "a", OpType::kAllreduce, 1});
  CHECK(events[2] == NegotiationEvent{Kind::kAnnounce, "a", OpType::kAllreduce, 0});
  CHECK(events[3] == NegotiationEvent{Kind::kEnd, "a", OpType::kAllreduce, 0});
  // An unknown id is rejected before the table sees it: no step.
  events.clear();
  CHECK_FALSE(n.AddRequests(0, {ById(9)}, kT0, &events).ok());
  CHECK(events.empty());
}

}  // namespace
}  // namespace kolo::controller

namespace kolo::controller {
namespace {

TensorMeta AddSet(std::vector<int64_t> members) {
  TensorMeta meta = testing::Meta("kolo.add_process_set", {0});
  meta.op = OpType::kAddProcessSet;
  meta.dtype = DataType::kUInt8;
  meta.splits = std::move(members);
  return meta;
}

TensorMeta InSet(const std::string& name, int set) {
  TensorMeta meta = testing::Meta(name + " [process set " + std::to_string(set) + "]");
  meta.process_set = set;
  return meta;
}

TEST_CASE("A process set gets an id, its own readiness among its members, and its own responses",
          "[controller][negotiator][process_sets]") {
  const Options options = MakeOptions(4);
  Negotiator n(options);
  std::vector<Response> added = AllSend(&n, 4, {testing::Full(AddSet({1, 3}))});
  REQUIRE(added.size() == 1);
  CHECK_FALSE(added[0].is_error());
  CHECK(added[0].root == 1);
  CHECK(added[0].splits == std::vector<int64_t>{1, 3});

  // Ready once ranks 1 and 3 announced it; rank 0 is not a member.
  REQUIRE(n.AddRequests(1, {testing::Full(InSet("x", 1))}, testing::kT0).ok());
  CHECK(n.pending_count() == 1);
  CHECK(n.AddRequests(0, {testing::Full(InSet("y", 1))}, testing::kT0).code() ==
        StatusCode::kInternal);
  REQUIRE(n.AddRequests(3, {testing::Full(InSet("x", 1))}, testing::kT0).ok());
  std::vector<Response> ran = n.Plan();
  REQUIRE(ran.size() == 1);
  CHECK(ran[0].process_set == 1);
  CHECK(ran[0].names == std::vector<std::string>{"x [process set 1]"});

  // Tensors of different sets never fuse, even ready one after another.
  REQUIRE(n.AddRequests(0, {testing::Full(testing::Meta("g"))}, testing::kT0).ok());
  REQUIRE(n.AddRequests(2, {testing::Full(testing::Meta("g"))}, testing::kT0).ok());
  REQUIRE(n.AddRequests(1, {testing::Full(testing::Meta("g")), testing::Full(InSet("x", 1))},
                        testing::kT0)
              .ok());
  REQUIRE(n.AddRequests(3, {testing::Full(testing::Meta("g")), testing::Full(InSet("x", 1))},
                        testing::kT0)
              .ok());
  CHECK(n.Plan().size() == 2);

  // Within one set they fuse as usual.
  for (int rank : {1, 3}) {
    REQUIRE(n.AddRequests(rank, {testing::Full(InSet("p", 1)), testing::Full(InSet("q", 1))},
                          testing::kT0)
                .ok());
  }
  std::vector<Response> fused = n.Plan();
  REQUIRE(fused.size() == 1);
  CHECK(fused[0].process_set == 1);
  CHECK(fused[0].names == std::vector<std::string>{"p [process set 1]", "q [process set 1]"});
}

TEST_CASE("Removing a process set fails while one of its names is pending",
          "[controller][negotiator][process_sets]") {
  const Options options = MakeOptions(2);
  Negotiator n(options);
  AllSend(&n, 2, {testing::Full(AddSet({0, 1}))});
  TensorMeta remove = testing::Meta("kolo.remove_process_set", {0});
  remove.op = OpType::kRemoveProcessSet;
  remove.dtype = DataType::kUInt8;
  remove.root = 1;
  REQUIRE(n.AddRequests(0, {testing::Full(InSet("late", 1))}, testing::kT0).ok());
  std::vector<Response> refused = AllSend(&n, 2, {testing::Full(remove)});
  REQUIRE(refused.size() == 1);
  CHECK(refused[0].error_code == StatusCode::kFailedPrecondition);
  CHECK(refused[0].error.find("'late [process set 1]'") != std::string::npos);

  REQUIRE(n.AddRequests(1, {testing::Full(InSet("late", 1))}, testing::kT0).ok());
  n.Plan();
  std::vector<Response> removed = AllSend(&n, 2, {testing::Full(remove)});
  REQUIRE(removed.size() == 1);
  CHECK_FALSE(removed[0].is_error());
  // The set is gone: its names are protocol errors now, and removing it again fails.
  CHECK(n.AddRequests(0, {testing::Full(InSet("x", 1))}, testing::kT0).code() ==
        StatusCode::kInternal);
  std::vector<Response> again = AllSend(&n, 2, {testing::Full(remove)});
  REQUIRE(again.size() == 1);
  CHECK(again[0].error.find("does not exist") != std::string::npos);
}

TEST_CASE("The stall inspector watches process sets, naming job ranks",
          "[controller][negotiator][process_sets][stall]") {
  const Options options = MakeOptions(4);
  Negotiator n(options);
  AllSend(&n, 4, {testing::Full(AddSet({1, 3}))});
  REQUIRE(n.AddRequests(1, {testing::Full(InSet("x", 1))}, testing::kT0).ok());
  StallInspector::Config config;
  config.check_seconds = 60;
  config.shutdown_seconds = 0;
  StallInspector inspector(config);
  CHECK(inspector.NextCheck(n.WatchedTables()) == testing::kT0 + std::chrono::seconds(60));
  StallInspector::Findings findings =
      inspector.Inspect(n.WatchedTables(), testing::kT0 + std::chrono::seconds(61));
  INFO(findings.warning);
  CHECK(findings.warning.find("rank 3 has not submitted 'x [process set 1]'") != std::string::npos);
}

TEST_CASE("A set's negotiation steps name job ranks, as the fast path's rounds do",
          "[controller][negotiator][process_sets][trace]") {
  using Kind = NegotiationEvent::Kind;
  const Options options = MakeOptions(4);
  Negotiator n(options);
  REQUIRE(AllSend(&n, 4, {testing::Full(AddSet({1, 3}))}).size() == 1);
  std::vector<NegotiationEvent> events;
  REQUIRE(n.AddRequests(3, {testing::Full(InSet("x", 1))}, testing::kT0, &events).ok());
  REQUIRE(n.AddRequests(1, {testing::Full(InSet("x", 1))}, testing::kT0, &events).ok());
  const std::string x = "x [process set 1]";
  // The set's table counts its members 0 and 1; the timeline shows job ranks 3 and 1.
  CHECK(events == std::vector<NegotiationEvent>{{Kind::kBegin, x, OpType::kAllreduce, -1},
                                                {Kind::kAnnounce, x, OpType::kAllreduce, 3},
                                                {Kind::kAnnounce, x, OpType::kAllreduce, 1},
                                                {Kind::kEnd, x, OpType::kAllreduce, 1}});
}

TEST_CASE("A malformed add_process_set is a protocol error naming the rank",
          "[controller][negotiator][process_sets]") {
  const Options options = MakeOptions(3);
  Negotiator n(options);
  for (const std::vector<int64_t>& members :
       {std::vector<int64_t>{}, {1, 0}, {0, 0}, {0, 3}, {-1, 1}}) {
    Status status = n.AddRequests(2, {testing::Full(AddSet(members))}, testing::kT0);
    INFO(status.ToString());
    CHECK(status.code() == StatusCode::kInternal);
    CHECK(status.message().find("rank 2") != std::string::npos);
  }
}

TEST_CASE("Ranks that disagree on a new set's members all get the mismatch",
          "[controller][negotiator][process_sets]") {
  const Options options = MakeOptions(3);
  Negotiator n(options);
  REQUIRE(n.AddRequests(0, {testing::Full(AddSet({0, 1}))}, testing::kT0).ok());
  REQUIRE(n.AddRequests(1, {testing::Full(AddSet({0, 1}))}, testing::kT0).ok());
  REQUIRE(n.AddRequests(2, {testing::Full(AddSet({0, 2}))}, testing::kT0).ok());
  std::vector<Response> responses = n.Plan();
  REQUIRE(responses.size() == 1);
  CHECK(responses[0].error ==
        "Ranks disagree on the members of a new process set (add_process_set): rank 0 sent "
        "[0, 1], rank 2 sent [0, 2]");
}

}  // namespace
}  // namespace kolo::controller
