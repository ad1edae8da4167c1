// Scenario 6 of docs/RELIABILITY.md: every kind of cross-rank disagreement about one tensor
// name that a CPU job can produce fails that op on every rank with one message naming the
// tensor, the kind and both values, and the job goes on. (Devices differ only with GPUs, and
// groups only through grouped ops: both are covered at the controller level, in
// tests/controller/meta_validation_test.cc.) Duplicate names are in errors_test.cc.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

struct Kind {
  std::string label;
  std::vector<std::string> needles;          // in every rank's message
  std::function<Status(Runtime&, int)> run;  // what rank r submits under the name "k"
};

TensorView Floats(std::vector<float>& data, std::vector<int64_t> shape) {
  return TensorView{data.data(), DataType::kFloat32, std::move(shape), Device::Cpu()};
}

Status AllreduceWith(Runtime& rt, const AllreduceOptions& options) {
  std::vector<float> x(6, 1.0f);
  return rt.Allreduce("k", Floats(x, {6}), Floats(x, {6}), options);
}

std::vector<Kind> Kinds() {
  std::vector<Kind> kinds;
  kinds.push_back({"operations",
                   {"Mismatched operations for 'k'", "allreduce", "broadcast"},
                   [](Runtime& rt, int r) {
                     std::vector<float> x(6, 1.0f);
                     return r == 0 ? rt.Allreduce("k", Floats(x, {6}), Floats(x, {6}))
                                   : rt.Broadcast("k", Floats(x, {6}), 0);
                   }});
  kinds.push_back(
      {"data types", {"Mismatched data types for 'k'", "float32", "int32"}, [](Runtime& rt, int r) {
         std::vector<int32_t> x(6, 1);
         TensorView view{
             x.data(), r == 0 ? DataType::kFloat32 : DataType::kInt32, {6}, Device::Cpu()};
         return rt.Allreduce("k", view, view);
       }});
  kinds.push_back({"shapes",
                   {"Mismatched allreduce shapes for 'k'", "[2, 3]", "[3, 2]"},
                   [](Runtime& rt, int r) {
                     std::vector<float> x(6, 1.0f);
                     std::vector<int64_t> shape =
                         r == 0 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{3, 2};
                     return rt.Allreduce("k", Floats(x, shape), Floats(x, shape));
                   }});
  kinds.push_back({"allgather inner dimensions",
                   {"Mismatched allgather inner dimensions for 'k'", "[2, 3]", "[2, 4]"},
                   [](Runtime& rt, int r) {
                     std::vector<float> x(8, 1.0f);
                     std::vector<float> out(64);
                     return rt.Allgather("k", Floats(x, {2, r == 0 ? 3 : 4}),
                                         [&](const std::vector<int64_t>&) { return out.data(); });
                   }});
  kinds.push_back(
      {"reduce ops", {"Mismatched reduce ops for 'k'", "sum", "max"}, [](Runtime& rt, int r) {
         AllreduceOptions o;
         o.op = r == 0 ? ReduceOp::kSum : ReduceOp::kMax;
         return AllreduceWith(rt, o);
       }});
  kinds.push_back({"root ranks",
                   {"Mismatched root ranks for 'k'", "rank 0 sent 0", "rank 1 sent 1"},
                   [](Runtime& rt, int r) {
                     std::vector<float> x(6, 1.0f);
                     return rt.Broadcast("k", Floats(x, {6}), r);
                   }});
  kinds.push_back(
      {"prescale factors", {"Mismatched prescale factors for 'k'"}, [](Runtime& rt, int r) {
         AllreduceOptions o;
         o.prescale = r == 0 ? 1.0 : 0.5;
         return AllreduceWith(rt, o);
       }});
  kinds.push_back(
      {"postscale factors", {"Mismatched postscale factors for 'k'"}, [](Runtime& rt, int r) {
         AllreduceOptions o;
         o.postscale = r == 0 ? 1.0 : 0.5;
         return AllreduceWith(rt, o);
       }});
  return kinds;
}

}  // namespace

TEST_CASE("Every kind of mismatch fails the op on every rank with one message; the job goes on",
          "[runtime][fault][errors]") {
  Watchdog watchdog("mismatch kinds", std::chrono::seconds(90));
  LocalJob job(2);
  for (const Kind& kind : Kinds()) {
    INFO(kind.label);
    std::vector<std::string> messages(2);
    auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
      Status s = kind.run(rt, rt.rank());
      messages[rt.rank()] = s.message();
      if (s.code() != StatusCode::kMismatch) return "expected MISMATCH, got " + s.ToString();
      for (const std::string& needle : kind.needles) {
        if (s.message().find(needle) == std::string::npos) {
          return "'" + s.message() + "' lacks '" + needle + "'";
        }
      }
      std::vector<float> after(3, 1.0f);
      Status next = rt.Allreduce("after/" + kind.label, Floats(after, {3}), Floats(after, {3}));
      if (!next.ok() || after[0] != 2.0f) return "the job did not go on: " + next.ToString();
      return "";
    });
    CHECK(failures == std::vector<std::string>{});
    CHECK(messages[0] == messages[1]);
  }
}
