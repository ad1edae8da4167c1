// GpuExecutor's launch and its failures, against the simulated device and collectives: Launch
// returns before the device finished and phases reach the observer; a ready event orders the
// streams; a collective fault and a hang fail the op naming the NCCL call or the deadline and
// abort the comm once; Interrupt fails what is queued with the root cause; join and barrier
// complete in order. Fixture: tests/ops/gpu/gpu_executor_rank.h.
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/op_validation.h"
#include "ops/gpu/gpu_executor.h"
#include "tests/ops/gpu/gpu_executor_rank.h"
#include "tests/support/sim_gpu/sim_star_link.h"
#include "tests/support/tensor_values.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using namespace kolo::gpu;
using namespace kolo::gpu::executor_test;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("Launch returns before the device finished; done runs after, in order",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("asynchronous launch", 60s);
  RequireAllPassed(RunRanks(
      2,
      [](ExecRank& rank) -> std::string {
        const int64_t count = 32;
        const DataType dtype = DataType::kFloat32;
        std::vector<std::unique_ptr<TensorEntry>> owned;
        std::mutex mu;
        std::vector<std::string> order;
        std::vector<std::promise<Status>> done(3);
        const auto main_thread = std::this_thread::get_id();
        bool on_main = false;
        for (size_t k = 0; k < 3; ++k) {
          void* in =
              rank.Upload(kolo::testing::MakeInput(dtype, count, rank.rank(), ReduceOp::kSum));
          owned.push_back(Entry("x" + std::to_string(k), OpType::kAllreduce, dtype, {count}, in));
        }
        for (size_t k = 0; k < 3; ++k) {
          TensorEntry* e = owned[k].get();
          const Status launched =
              rank.exec().Launch(MakeResponse(OpType::kAllreduce, dtype, {e}), {e}, nullptr,
                                 [&, k, e](const Status& s) {
                                   std::lock_guard<std::mutex> lock(mu);
                                   order.push_back(e->meta.name);
                                   on_main = on_main || std::this_thread::get_id() == main_thread;
                                   done[k].set_value(s);
                                 });
          if (!launched.ok()) return launched.ToString();
        }
        {
          // Each stream operation takes 50 ms: nothing can have completed yet.
          std::lock_guard<std::mutex> lock(mu);
          if (!order.empty()) return "done ran before the device finished";
        }
        if (rank.exec().pending() != 3) return "not 3 ops pending";
        for (auto& d : done) {
          std::future<Status> f = d.get_future();
          if (f.wait_for(20s) != std::future_status::ready) return "done never ran";
          if (Status s = f.get(); !s.ok()) return s.ToString();
        }
        if (on_main) return "done ran on the launching thread";
        if (order != std::vector<std::string>{"x0", "x1", "x2"}) return "out of order";
        for (const auto& e : owned) {
          const std::string bad = kolo::testing::CheckAllreduce(
              rank.Download(e->output.data, count * 4), dtype, count, rank.size(), ReduceOp::kSum);
          if (!bad.empty()) return bad;
        }
        return "";
      },
      [](int) {
        RankOptions options;
        options.device.op_delay = 50ms;
        return options;
      }));
}

TEST_CASE("A ready event orders kolo's stream after the producer's", "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("ready event", 60s);
  EventHandle ready = nullptr;
  RequireAllPassed(RunRanks(
      1,
      [&ready](ExecRank& rank) -> std::string {
        // The producer: a slow stream of the user's writing the input after a while.
        StreamHandle user = *rank.dev().CreateStream(false);
        ready = *rank.dev().CreateEvent(false);
        const int64_t count = 16;
        const std::vector<uint8_t> values =
            Bytes(DataType::kFloat32, count, [](size_t i) { return i + 1.0; });
        void* in = rank.Alloc(count * 4);
        REQUIRE(rank.dev()
                    .Enqueue(user,
                             [] {
                               std::this_thread::sleep_for(100ms);
                               return Status::Ok();
                             })
                    .ok());
        REQUIRE(rank.dev()
                    .MemcpyAsync(in, values.data(), count * 4, CopyKind::kHostToDevice, user)
                    .ok());
        REQUIRE(rank.dev().RecordEvent(ready, user).ok());
        auto e = Entry("r", OpType::kAllreduce, DataType::kFloat32, {count}, in);
        const Status s =
            Run(rank.exec(), MakeResponse(OpType::kAllreduce, DataType::kFloat32, {e.get()}),
                {e.get()});
        std::string result = s.ok() ? "" : s.ToString();
        if (result.empty()) {
          result = Compare(
              rank.Download(in, count * 4), DataType::kFloat32, [](size_t i) { return i + 1.0; },
              "after the ready event");
        }
        rank.dev().DestroyStream(user).IgnoreError();
        rank.dev().DestroyEvent(ready).IgnoreError();
        return result;
      },
      [&ready](int) {
        RankOptions options;
        options.ready_event = [&ready](const TensorEntry&) { return ready; };
        return options;
      }));
}

TEST_CASE(
    "A collective fault fails the op on every rank naming the call and the rank, and "
    "aborts each comm once",
    "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("collective fault", 60s);
  const auto results = RunRanks(
      2,
      [](ExecRank& rank) -> std::string {
        const int64_t count = 100;
        const DataType dtype = DataType::kFloat32;
        std::vector<std::unique_ptr<TensorEntry>> owned;
        for (int k = 0; k < 2; ++k) {
          void* in =
              rank.Upload(kolo::testing::MakeInput(dtype, count, rank.rank(), ReduceOp::kSum));
          owned.push_back(Entry("w" + std::to_string(k), OpType::kAllreduce, dtype, {count}, in));
        }
        TensorEntry* first = owned[0].get();
        TensorEntry* second = owned[1].get();
        const Status ok =
            Run(rank.exec(), MakeResponse(OpType::kAllreduce, dtype, {first}), {first});
        if (!ok.ok()) return "first op: " + ok.ToString();
        const Status failed =
            Run(rank.exec(), MakeResponse(OpType::kAllreduce, dtype, {second}), {second});
        if (rank.aborts() != 1) return "aborted " + std::to_string(rank.aborts()) + " times";
        rank.exec().Interrupt(Aborted("the job aborted"));  // the loop's verdict: no 2nd abort
        if (rank.aborts() != 1) return "Interrupt aborted again";
        return failed.message();
      },
      [](int r) {
        RankOptions options;
        if (r == 1) options.coll.fault = sim::SimCollectives::Fault::kAsyncError;
        options.coll.fault_after_ops = 1;
        return options;
      });
  CHECK(results[1] ==
        std::string("allreduce 'w1': ") + kRemote + "simulated async error on rank 1 after 1 ops");
  CHECK(results[0] == std::string("allreduce 'w1': ") + kRemote +
                          "rank 1 failed: simulated async error on rank 1 after 1 ops");
}

TEST_CASE("An op hung past KOLO_TIMEOUT_SECONDS fails at the deadline and the abort frees its peer",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("hang", 60s);
  ManualClock clock;  // rank 1's: the test moves it past the deadline
  const auto results = RunRanks(
      2,
      [&](ExecRank& rank) -> std::string {
        const int64_t count = 8;
        void* in = rank.Upload(
            kolo::testing::MakeInput(DataType::kFloat32, count, rank.rank(), ReduceOp::kSum));
        auto e = Entry("h", OpType::kAllreduce, DataType::kFloat32, {count}, in);
        auto promise = std::make_shared<std::promise<Status>>();
        std::future<Status> done = promise->get_future();
        const Status launched = rank.exec().Launch(
            MakeResponse(OpType::kAllreduce, DataType::kFloat32, {e.get()}), {e.get()}, nullptr,
            [promise](const Status& s) { promise->set_value(s); });
        if (!launched.ok()) return launched.ToString();
        if (rank.rank() == 1) {
          if (done.wait_for(200ms) != std::future_status::timeout)
            return "done before the deadline";
          const auto start = std::chrono::steady_clock::now();
          clock.Advance(std::chrono::seconds(5));
          if (done.wait_for(5s) != std::future_status::ready) return "no failure at the deadline";
          if (std::chrono::steady_clock::now() - start > 2s) return "slow to fail";
        } else if (done.wait_for(20s) != std::future_status::ready) {
          return "the peer was not freed";
        }
        if (rank.aborts() != 1) return "aborted " + std::to_string(rank.aborts()) + " times";
        return done.get().message();
      },
      [&clock](int r) {
        RankOptions options;
        if (r == 1) {
          options.coll.fault = sim::SimCollectives::Fault::kHang;
          options.clock = &clock;
          options.timeout_seconds = 5;
        }
        return options;
      });
  CHECK(results[1] ==
        "allreduce 'h': the device did not finish it within 5 s (KOLO_TIMEOUT_SECONDS)");
  CHECK_THAT(results[0], Contains("allreduce 'h': ") && Contains(kRemote) &&
                             Contains("rank 1 closed its connection"));
}

TEST_CASE("Interrupt fails the queued ops with the root cause and aborts the comm once",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("interrupt", 60s);
  const UniqueId id = sim::NewSimId();
  ExecRank rank0(2, 0, id);
  ExecRank rank1(2, 1, id);  // never runs its part: rank 0's ops wait for it
  std::vector<std::unique_ptr<TensorEntry>> owned;
  std::vector<std::promise<Status>> done(3);
  for (size_t k = 0; k < 3; ++k) {
    owned.push_back(Entry("q" + std::to_string(k), OpType::kAllreduce, DataType::kFloat32, {4},
                          rank0.Alloc(16)));
    TensorEntry* e = owned.back().get();
    REQUIRE(rank0.exec()
                .Launch(MakeResponse(OpType::kAllreduce, DataType::kFloat32, {e}), {e}, nullptr,
                        [&done, k](const Status& s) { done[k].set_value(s); })
                .ok());
  }
  std::this_thread::sleep_for(100ms);
  CHECK(rank0.exec().pending() == 3);
  const Status why = Aborted("rank 1: lost its controller connection");
  rank0.exec().Interrupt(why);
  rank0.exec().Interrupt(Aborted("a later cause"));  // the first one wins
  for (auto& d : done) {
    std::future<Status> f = d.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(f.get() == why);
  }
  CHECK(rank0.aborts() == 1);
  CHECK(rank1.aborts() == 0);
}

TEST_CASE("Join and barrier complete in order after the ops before them, or at once",
          "[gpu-sim][gpu-executor]") {
  kolo::testing::Watchdog watchdog("join", 60s);
  RequireAllPassed(RunRanks(
      2,
      [](ExecRank& rank) -> std::string {
        // Like the loop's join entry: no tensor, host memory.
        auto join = std::make_unique<TensorEntry>();
        join->meta.name = "join";
        join->meta.op = OpType::kJoin;
        Response response = MakeResponse(OpType::kJoin, DataType::kFloat32, {join.get()});
        // First thing on a fresh executor: no device chosen yet, nothing to wait for.
        if (Status s = Run(rank.exec(), response, {join.get()}); !s.ok()) return s.ToString();
        void* in = rank.Upload(
            kolo::testing::MakeInput(DataType::kFloat32, 64, rank.rank(), ReduceOp::kSum));
        auto e = Entry("y", OpType::kAllreduce, DataType::kFloat32, {64}, in);
        std::mutex mu;
        std::vector<std::string> order;
        auto record = [&](const std::string& name) {
          return [&, name](const Status& s) {
            std::lock_guard<std::mutex> lock(mu);
            order.push_back(name + (s.ok() ? "" : ": " + s.ToString()));
          };
        };
        Status launched =
            rank.exec().Launch(MakeResponse(OpType::kAllreduce, DataType::kFloat32, {e.get()}),
                               {e.get()}, nullptr, record("allreduce"));
        if (!launched.ok()) return launched.ToString();
        response.op = OpType::kBarrier;
        if (Status s = Run(rank.exec(), response, {join.get()}); !s.ok()) return s.ToString();
        std::lock_guard<std::mutex> lock(mu);
        return order == std::vector<std::string>{"allreduce"} ? "" : "the barrier overtook";
      },
      [](int) {
        RankOptions options;
        options.device.op_delay = 20ms;
        return options;
      }));
}
