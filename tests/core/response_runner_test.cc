// ResponseRunner on its own: a real tensor queue and a recording executor, driven response by
// response on the test's thread: sequence, cache ids, join stand-ins, process sets, and what
// comes back as a fault.
#include "core/loop/response_runner.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <vector>

using namespace kolo;

namespace {

// Runs responses by doubling each float (a two-rank sum of equal inputs), records what it saw,
// and fails when told to. `during` runs inside Execute (as a peer's op arriving meanwhile).
class RecordingExecutor final : public Executor {
 public:
  Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                 PhaseObserver*) override {
    ran.push_back(response);
    inputs.emplace_back();
    for (TensorEntry* e : entries) {
      if (e->input.data == nullptr) continue;  // a join moves no data
      auto* data = static_cast<float*>(e->input.data);
      inputs.back().emplace_back(data, data + e->input.num_elements());
      auto* out = static_cast<float*>(e->output.data);
      for (int64_t i = 0; i < e->input.num_elements(); ++i) out[i] = 2 * data[i];
    }
    if (during) during();
    return fail;
  }
  std::vector<Response> ran;
  std::vector<std::vector<std::vector<float>>> inputs;  // per response, per entry
  std::function<void()> during;
  Status fail;
};

// One rank's runner with its queue, executor and completer.
class Runner {
 public:
  explicit Runner(ProcessSets* sets = nullptr)
      : queue_(&wakeup_),
        completer_(&queue_, nullptr, &clock_, MakeLogger(0, "loop", spdlog::level::warn)),
        async_(&executor_, &completer_, nullptr, &wakeup_, &clock_, 30,
               MakeLogger(0, "loop", spdlog::level::warn)),
        runner_(ResponseRunner::Config{sets, [this](int id) { return SetExecutor(id); }, nullptr},
                &queue_, &executor_, &completer_, &async_, nullptr, &clock_) {}

  // An allreduce of `data` named `name` (in set `set`), whose callback stores its status.
  TensorEntry* Allreduce(const std::string& name, std::vector<float>* data, int set = 0) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta.name = name;
    entry->meta.shape = {static_cast<int64_t>(data->size())};
    entry->meta.process_set = set;
    entry->input = {data->data(), DataType::kFloat32, entry->meta.shape, Device::Cpu()};
    entry->output = entry->input;
    entry->callback = [this, name](const Status& s) { outcomes[name].push_back(s); };
    TensorEntry* raw = entry.get();
    REQUIRE(queue_.Enqueue(std::move(entry)).ok());
    return raw;
  }
  TensorEntry* Join(int* last) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta.name = "join";
    entry->meta.op = OpType::kJoin;
    entry->meta.dtype = DataType::kUInt8;
    entry->meta.shape = {0};
    entry->int_result = last;
    entry->callback = [this](const Status& s) { outcomes["join"].push_back(s); };
    TensorEntry* raw = entry.get();
    REQUIRE(queue_.Enqueue(std::move(entry)).ok());
    runner_.NoteJoin(*raw);
    return raw;
  }

  ResponseRunner& runner() { return runner_; }
  RecordingExecutor& executor() { return executor_; }
  TensorQueue& queue() { return queue_; }
  std::map<std::string, std::vector<Status>> outcomes;
  std::map<int, RecordingExecutor> set_executors;

 private:
  Executor* SetExecutor(int id) { return &set_executors[id]; }

  ManualClock clock_;
  Wakeup wakeup_;
  TensorQueue queue_;
  RecordingExecutor executor_;
  OpCompleter completer_;
  AsyncOps async_;
  ResponseRunner runner_;
};

Response AllreduceResponse(uint64_t seq, std::vector<std::string> names,
                           std::vector<int64_t> elements, std::vector<uint32_t> ids = {}) {
  Response r;
  r.seq = seq;
  r.names = std::move(names);
  r.num_elements = std::move(elements);
  r.cache_ids = ids.empty() ? std::vector<uint32_t>(r.names.size(), 0) : std::move(ids);
  return r;
}

}  // namespace

TEST_CASE("The runner runs the controller's responses in sequence and refuses a gap",
          "[core][loop]") {
  Runner rank;
  std::vector<float> a = {1, 2}, b = {3};
  rank.Allreduce("a", &a);
  rank.Allreduce("b", &b);
  REQUIRE(rank.runner().RunControllerResponse(AllreduceResponse(1, {"a", "b"}, {2, 1})).ok());
  CHECK(a == std::vector<float>{2, 4});
  CHECK(b == std::vector<float>{6});
  CHECK(rank.outcomes["a"].size() == 1);
  CHECK(rank.outcomes["a"][0].ok());
  CHECK(rank.queue().InFlight() == 0);
  const Fault gap = rank.runner().RunControllerResponse(AllreduceResponse(3, {"c"}, {1}));
  CHECK(gap.origin() == Fault::Origin::kHere);
  CHECK(gap.why().message() == "protocol error: response 3 arrived after 1");
}

TEST_CASE(
    "A response for a tensor this rank never submitted is a protocol error; an error "
    "response fails the ops it names",
    "[core][loop]") {
  Runner rank;
  std::vector<float> a = {1};
  rank.Allreduce("a", &a);
  Response mismatch = AllreduceResponse(1, {"a", "never"}, {1, 1});
  mismatch.error = "ranks disagree on 'a'";
  REQUIRE(rank.runner().RunControllerResponse(mismatch).ok());
  REQUIRE(rank.outcomes["a"].size() == 1);
  CHECK(rank.outcomes["a"][0].code() == StatusCode::kMismatch);
  CHECK(rank.outcomes["a"][0].message() == "ranks disagree on 'a'");
  CHECK(rank.executor().ran.empty());
  const Fault unknown = rank.runner().RunControllerResponse(AllreduceResponse(2, {"x"}, {1}));
  CHECK(unknown.origin() == Fault::Origin::kHere);
  CHECK(unknown.why().message() ==
        "protocol error: the controller decided on 'x', which this rank never submitted");
}

TEST_CASE("Requests carry the cache id the controller assigned while the metadata is the same",
          "[core][loop]") {
  Runner rank;
  std::vector<float> a = {1, 2};
  TensorEntry* first = rank.Allreduce("a", &a);
  const TensorMeta meta = first->meta;
  CHECK(rank.runner().cache().RequestFor(*first).cache_id == 0);  // nothing learned yet
  REQUIRE(rank.runner().RunControllerResponse(AllreduceResponse(1, {"a"}, {2}, {7})).ok());
  CHECK(rank.runner().cache().IdOf("a") == 7);
  TensorEntry* again = rank.Allreduce("a", &a);
  Request cached = rank.runner().cache().RequestFor(*again);
  CHECK(cached.cache_id == 7);
  CHECK(cached.meta.name.empty());  // the id stands for the metadata
  again->meta.shape = {1};          // changed: sent in full
  Request changed = rank.runner().cache().RequestFor(*again);
  CHECK(changed.cache_id == 0);
  CHECK(changed.meta == again->meta);
  again->meta = meta;
  // A response that assigns 0 retires the id.
  REQUIRE(rank.runner().RunControllerResponse(AllreduceResponse(2, {"a"}, {2}, {0})).ok());
  CHECK(rank.runner().cache().IdOf("a") == 0);
}

TEST_CASE(
    "A joined rank runs zeros for the allreduces it never submitted until its join "
    "completes",
    "[core][loop]") {
  Runner rank;
  int last = -1;
  rank.Join(&last);
  // 'g' never submitted here: a zero stand-in of the response's size takes part.
  std::vector<float> next_g = {5};
  rank.executor().during = [&] {
    // Meanwhile this rank submits its own 'g' (the next op of that name): it stays queued.
    if (rank.queue().Find("g") == nullptr) rank.Allreduce("g", &next_g);
  };
  REQUIRE(rank.runner().RunControllerResponse(AllreduceResponse(1, {"g"}, {3})).ok());
  REQUIRE(rank.executor().inputs.size() == 1);
  CHECK(rank.executor().inputs[0][0] == std::vector<float>{0, 0, 0});
  CHECK(rank.queue().Find("g") != nullptr);
  CHECK(rank.outcomes["g"].empty());
  rank.executor().during = nullptr;
  // The join completes, naming the last rank to join; zeros stand in no more.
  Response join;
  join.seq = 2;
  join.op = OpType::kJoin;
  join.root = 1;
  join.names = {"join"};
  REQUIRE(rank.runner().RunControllerResponse(join).ok());
  CHECK(last == 1);
  REQUIRE(rank.outcomes["join"].size() == 1);
  CHECK(rank.outcomes["join"][0].ok());
  const Fault absent = rank.runner().RunControllerResponse(AllreduceResponse(3, {"h"}, {1}));
  CHECK(absent.why().message() ==
        "protocol error: the controller decided on 'h', which this rank never submitted");
}

TEST_CASE("A failed collective is a fault in the collective; its entries stay for the abort",
          "[core][loop]") {
  Runner rank;
  std::vector<float> a = {1};
  rank.Allreduce("a", &a);
  rank.executor().fail = Unavailable("allreduce 'a': rank 1 closed the connection");
  const Fault failed = rank.runner().RunControllerResponse(AllreduceResponse(1, {"a"}, {1}));
  CHECK(failed.origin() == Fault::Origin::kInCollective);
  CHECK(failed.why() == rank.executor().fail);
  CHECK(rank.outcomes["a"].empty());
  CHECK(rank.queue().InFlight() == 1);
}

TEST_CASE(
    "Process sets: decisions apply to the registry, and a set's responses run on its "
    "members' executor only",
    "[core][loop]") {
  ProcessSets sets(/*rank=*/1, /*size=*/4);
  Runner rank(&sets);
  Response unknown = AllreduceResponse(1, {"x [process set 1]"}, {1});
  unknown.process_set = 1;
  const Fault fault = rank.runner().RunControllerResponse(unknown);
  CHECK(fault.why().message() ==
        "protocol error: response 1 is for process set 1, which this rank does not know");

  Runner member(&sets);
  // Both sets are added on every rank (an add is an op of the global set).
  std::vector<int> ids;
  for (int set = 1; set <= 2; ++set) {
    int id = 0;
    auto add = std::make_unique<TensorEntry>();
    add->meta.name = "kolo.add_process_set";
    add->meta.op = OpType::kAddProcessSet;
    add->int_result = &id;
    REQUIRE(member.queue().Enqueue(std::move(add)).ok());
    Response added;
    added.seq = static_cast<uint64_t>(set);
    added.op = OpType::kAddProcessSet;
    added.root = set;
    added.splits = set == 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{2, 3};
    added.names = {"kolo.add_process_set"};
    REQUIRE(member.runner().RunControllerResponse(added).ok());
    ids.push_back(id);
  }
  CHECK(ids == std::vector<int>{1, 2});
  CHECK(sets.Members(1) == std::vector<int>{0, 1});
  CHECK(sets.IsMember(1));
  CHECK_FALSE(sets.IsMember(2));
  std::vector<float> x = {1};
  member.Allreduce("x [process set 1]", &x, 1);
  Response in_set = AllreduceResponse(3, {"x [process set 1]"}, {1});
  in_set.process_set = 1;
  REQUIRE(member.runner().RunControllerResponse(in_set).ok());
  CHECK(member.set_executors[1].ran.size() == 1);
  CHECK(member.executor().ran.empty());
  CHECK(x == std::vector<float>{2});
  // Set 2's response is skipped here: this rank is not a member.
  Response not_mine = AllreduceResponse(4, {"y [process set 2]"}, {1});
  not_mine.process_set = 2;
  REQUIRE(member.runner().RunControllerResponse(not_mine).ok());
  CHECK(member.set_executors.count(2) == 0);
}
