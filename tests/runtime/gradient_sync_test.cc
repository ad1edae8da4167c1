// GradientSync over real runtimes: N ranks as threads of one process, joined over real gRPC and
// loopback sockets. Checks averaging and summing, local accumulation over several backward
// passes, fp16 compression, overlap (a gradient reduced before the last one is ready) and errors.
#include "kolo/gradient_sync.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "tests/support/local_job.h"
#include "tests/support/watchdog.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::Watchdog;

namespace {

constexpr std::chrono::milliseconds kWaitLimit = std::chrono::seconds(60);

template <typename T>
TensorView View(std::vector<T>& values, DataType dtype) {
  TensorView view;
  view.data = values.data();
  view.dtype = dtype;
  view.shape = {static_cast<int64_t>(values.size())};
  return view;
}

std::unique_ptr<GradientSync> MakeSync(Runtime& rt, const GradientSyncOptions& options,
                                       std::string* error) {
  StatusOr<std::unique_ptr<GradientSync>> sync = GradientSync::Create(rt, options);
  if (!sync.ok()) {
    *error = "Create: " + sync.status().ToString();
    return nullptr;
  }
  return std::move(sync).value();
}

// "" if every element of `got` equals want(i) (within `tolerance` relative), else a message.
template <typename T, typename Want>
std::string Compare(const std::string& what, const std::vector<T>& got, Want want,
                    double tolerance = 0.0) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double expected = want(static_cast<int64_t>(i));
    const double diff = std::fabs(static_cast<double>(got[i]) - expected);
    if (diff > tolerance * std::fabs(expected)) {
      std::ostringstream out;
      out << what << "[" << i << "] = " << static_cast<double>(got[i]) << ", want " << expected;
      return out.str();
    }
  }
  return "";
}

std::string Check(const Status& status, const std::string& what) {
  return status.ok() ? "" : what + ": " + status.ToString();
}

// Runs Synchronize and checks that it did (or did not) step.
std::string SyncExpecting(GradientSync& sync, bool expect_step) {
  StatusOr<bool> stepped = sync.Synchronize();
  if (!stepped.ok()) return "Synchronize: " + stepped.status().ToString();
  if (*stepped != expect_step) return expect_step ? "Synchronize did not step" : "stepped early";
  return "";
}

}  // namespace

TEST_CASE("GradientSync averages or sums every registered gradient across ranks",
          "[runtime][gradient_sync]") {
  const int n = GENERATE(2, 3);
  const ReduceOp op = GENERATE(ReduceOp::kAverage, ReduceOp::kSum);
  Watchdog watchdog("gradient sync average/sum", std::chrono::seconds(60));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::string error;
    GradientSyncOptions options;
    options.op = op;
    auto sync = MakeSync(rt, options, &error);
    if (!sync) return error;
    const std::vector<int64_t> counts = {0, 1, 13, 1000 * n + 1};
    std::vector<std::vector<float>> f32(counts.size());
    std::vector<double> f64(7);
    std::vector<int32_t> i32(5);
    for (size_t t = 0; t < counts.size(); ++t) {
      f32[t].resize(counts[t]);
      error += Check(sync->Register("f32/" + std::to_string(t), View(f32[t], DataType::kFloat32)),
                     "Register");
    }
    error += Check(sync->Register("f64", View(f64, DataType::kFloat64)), "Register f64");
    if (op == ReduceOp::kSum) {
      error += Check(sync->Register("i32", View(i32, DataType::kInt32)), "Register i32");
    }
    if (!error.empty()) return error;
    const int r = rt.rank();
    // Small integers: every sum and average (n = 2, 3) is exact.
    auto value = [](int rank, int64_t i) { return (rank + 1) + static_cast<double>(i % 7); };
    auto want = [&](int64_t i) {
      const double sum = n * (n + 1) / 2.0 + n * static_cast<double>(i % 7);
      return op == ReduceOp::kAverage ? sum / n : sum;
    };
    for (int step = 0; step < 2; ++step) {  // the second step reuses the per-step state
      for (size_t t = 0; t < counts.size(); ++t) {
        for (int64_t i = 0; i < counts[t]; ++i) f32[t][i] = static_cast<float>(value(r, i));
        if (auto e = Check(sync->Ready("f32/" + std::to_string(t)), "Ready"); !e.empty()) return e;
      }
      for (size_t i = 0; i < f64.size(); ++i) f64[i] = value(r, i);
      for (size_t i = 0; i < i32.size(); ++i) i32[i] = static_cast<int32_t>(value(r, i));
      if (auto e = Check(sync->Ready("f64"), "Ready f64"); !e.empty()) return e;
      if (op == ReduceOp::kSum) {
        if (auto e = Check(sync->Ready("i32"), "Ready i32"); !e.empty()) return e;
      }
      if (auto e = SyncExpecting(*sync, true); !e.empty()) return e;
      for (size_t t = 0; t < counts.size(); ++t) {
        if (auto e = Compare("f32/" + std::to_string(t), f32[t], want); !e.empty()) return e;
      }
      if (auto e = Compare("f64", f64, want); !e.empty()) return e;
      if (op == ReduceOp::kSum) {
        if (auto e = Compare("i32", i32, want); !e.empty()) return e;
      }
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("GradientSync accumulates k backward passes and communicates only on the k-th",
          "[runtime][gradient_sync]") {
  const int n = GENERATE(2, 3);
  const ReduceOp op = GENERATE(ReduceOp::kAverage, ReduceOp::kSum);
  const bool fp16 = GENERATE(false, true);
  // Horovod torch's convention (the passes summed) and TF's average_aggregated_gradients.
  const bool average_passes = GENERATE(false, true);
  constexpr int kPasses = 3;
  Watchdog watchdog("gradient sync accumulation", std::chrono::seconds(60));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::string error;
    GradientSyncOptions options;
    options.op = op;
    options.backward_passes_per_step = kPasses;
    options.fp16_compression = fp16;
    options.average_aggregated_gradients = average_passes;
    auto sync = MakeSync(rt, options, &error);
    if (!sync) return error;
    std::vector<float> w(101);
    if (auto e = Check(sync->Register("w", View(w, DataType::kFloat32)), "Register"); !e.empty()) {
      return e;
    }
    const int r = rt.rank();
    // Pass p of rank r contributes (r + 1) * (p + 1) + i: small integers, exact in fp16 too.
    auto want = [&](int64_t i) {
      const double sum = 6.0 * n * (n + 1) / 2 + kPasses * n * static_cast<double>(i);
      const double divisor = (op == ReduceOp::kAverage ? n : 1) * (average_passes ? kPasses : 1);
      return sum / divisor;
    };
    for (int step = 0; step < 2; ++step) {
      for (int pass = 0; pass < kPasses; ++pass) {
        for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((r + 1) * (pass + 1) + i);
        if (auto e = Check(sync->Ready("w"), "Ready"); !e.empty()) return e;
        const bool last = pass == kPasses - 1;
        if (!last) {
          if (sync->IsReduced("w")) return "an allreduce started on pass " + std::to_string(pass);
          if (sync->WaitReduced("w", kWaitLimit).code() != StatusCode::kFailedPrecondition) {
            return "WaitReduced on a non-communicating pass did not fail";
          }
        }
        if (auto e = SyncExpecting(*sync, last); !e.empty()) return e;
        if (sync->passes_in_step() != (last ? 0 : pass + 1)) return "wrong passes_in_step";
        if (!last && w[1] != static_cast<float>((r + 1) * (pass + 1) + 1)) {
          return "a non-communicating Synchronize changed the caller's buffer";
        }
      }
      if (auto e = Compare("w", w, want); !e.empty())
        return "step " + std::to_string(step) + ": " + e;
    }
    return "";
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("GradientSync fp16 compression is exact for fp16 values and close for others",
          "[runtime][gradient_sync]") {
  Watchdog watchdog("gradient sync fp16", std::chrono::seconds(60));
  const int n = 2;
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::string error;
    GradientSyncOptions options;
    options.fp16_compression = true;
    auto sync = MakeSync(rt, options, &error);
    if (!sync) return error;
    std::vector<float> exact(1001), inexact(1001), tiny(17);
    std::vector<double> wide(31);  // not float32: travels uncompressed
    error += Check(sync->Register("exact", View(exact, DataType::kFloat32)), "Register");
    error += Check(sync->Register("inexact", View(inexact, DataType::kFloat32)), "Register");
    error += Check(sync->Register("tiny", View(tiny, DataType::kFloat32)), "Register");
    error += Check(sync->Register("wide", View(wide, DataType::kFloat64)), "Register");
    if (!error.empty()) return error;
    const int r = rt.rank();
    auto exact_value = [](int rank, int64_t i) { return (i % 64) * 0.25 - 3 + rank; };
    auto inexact_value = [](int rank, int64_t i) { return 0.1 * (i + 1) * (rank + 1); };
    auto tiny_value = [](int rank, int64_t i) {
      return std::ldexp(1.0, -23) * (i + 1) * (rank + 1);
    };
    for (size_t i = 0; i < exact.size(); ++i) {
      exact[i] = static_cast<float>(exact_value(r, i));
      inexact[i] = static_cast<float>(inexact_value(r, i));
    }
    for (size_t i = 0; i < tiny.size(); ++i) tiny[i] = static_cast<float>(tiny_value(r, i));
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = inexact_value(r, i);
    for (const char* name : {"exact", "inexact", "tiny", "wide"}) {
      if (auto e = Check(sync->Ready(name), std::string("Ready ") + name); !e.empty()) return e;
    }
    if (auto e = SyncExpecting(*sync, true); !e.empty()) return e;
    auto average = [&](auto value) {
      return [value](int64_t i) { return (value(0, i) + value(1, i)) / 2; };
    };
    error = Compare("exact", exact, average(exact_value));
    // fp16 keeps 11 significant bits: each of rounding in, reducing and averaging costs at
    // most half an ulp (2^-11 relative).
    if (error.empty()) error = Compare("inexact", inexact, average(inexact_value), 3 * 0x1p-11);
    // Multiples of 2^-24 below 2^-14 are fp16 subnormals: exact, and so is this average.
    if (error.empty()) error = Compare("tiny", tiny, average(tiny_value));
    if (error.empty()) error = Compare("wide", wide, average(inexact_value));
    // Proof that float32 really travelled as fp16: 0.15 has no exact fp16 form.
    if (error.empty() && inexact[0] == 0.15f) error = "inexact[0] is exact: not compressed";
    return error;
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("GradientSync reduces a gradient marked ready early before the last is ready",
          "[runtime][gradient_sync]") {
  const int n = GENERATE(2, 3);
  Watchdog watchdog("gradient sync overlap", std::chrono::seconds(60));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::string error;
    auto sync = MakeSync(rt, {}, &error);
    if (!sync) return error;
    std::vector<float> early(4096, static_cast<float>(rt.rank())), late(9, 1.0f);
    error += Check(sync->Register("early", View(early, DataType::kFloat32)), "Register");
    error += Check(sync->Register("late", View(late, DataType::kFloat32)), "Register");
    if (!error.empty()) return error;
    if (auto e = Check(sync->Ready("early"), "Ready early"); !e.empty()) return e;
    // Every rank has submitted 'early' and nothing else: it completes on its own, while the
    // rest of the "backward pass" (here: nothing) is still running.
    if (auto e = Check(sync->WaitReduced("early", kWaitLimit), "WaitReduced early"); !e.empty()) {
      return e;
    }
    if (!sync->IsReduced("early")) return "IsReduced('early') is false after WaitReduced";
    if (sync->IsReduced("late")) return "'late' reduced before it was ready";
    if (auto e = Check(sync->Ready("late"), "Ready late"); !e.empty()) return e;
    if (auto e = SyncExpecting(*sync, true); !e.empty()) return e;
    error = Compare("early", early, [&](int64_t) { return (n - 1) / 2.0; });
    if (error.empty()) error = Compare("late", late, [](int64_t) { return 1.0; });
    return error;
  });
  CHECK(failures == std::vector<std::string>{});
}

TEST_CASE("GradientSync rejects bad options, unknown names and a second Ready",
          "[runtime][gradient_sync]") {
  Watchdog watchdog("gradient sync local errors", std::chrono::seconds(60));
  LocalJob job(1);
  Runtime& rt = job.rank(0);
  GradientSyncOptions max_op;
  max_op.op = ReduceOp::kMax;
  CHECK(GradientSync::Create(rt, max_op).status().code() == StatusCode::kInvalidArgument);
  GradientSyncOptions zero_passes;
  zero_passes.backward_passes_per_step = 0;
  CHECK(GradientSync::Create(rt, zero_passes).status().code() == StatusCode::kInvalidArgument);

  {
    // Horovod torch's default sums the passes: integers are fine, bool has no average.
    GradientSyncOptions summed;
    summed.backward_passes_per_step = 2;
    auto plain = GradientSync::Create(rt, summed);
    REQUIRE(plain.ok());
    std::vector<int32_t> ints(3, 1);
    std::vector<uint8_t> flags(3, 1);
    CHECK((*plain)->Register("ints", View(ints, DataType::kInt32)).ok());
    Status bools = (*plain)->Register("flags", View(flags, DataType::kBool));
    CHECK(bools.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(bools.message(), Catch::Contains("'flags'") && Catch::Contains("no average"));
  }

  GradientSyncOptions accumulate;
  accumulate.backward_passes_per_step = 2;
  accumulate.average_aggregated_gradients = true;
  auto sync = GradientSync::Create(rt, accumulate);
  REQUIRE(sync.ok());
  GradientSync& s = *sync.value();
  std::vector<float> a(3, 1.0f);
  std::vector<int32_t> ints(3, 1);
  REQUIRE(s.Register("a", View(a, DataType::kFloat32)).ok());
  CHECK(s.Register("a", View(a, DataType::kFloat32)).code() == StatusCode::kInvalidArgument);
  Status int_average = s.Register("ints", View(ints, DataType::kInt32));
  CHECK(int_average.code() == StatusCode::kInvalidArgument);
  CHECK(int_average.message().find("'ints'") != std::string::npos);
  CHECK(int_average.message().find("average_aggregated_gradients") != std::string::npos);

  Status unknown = s.Ready("nope");
  CHECK(unknown.code() == StatusCode::kInvalidArgument);
  CHECK(unknown.message().find("'nope'") != std::string::npos);
  CHECK(s.WaitReduced("nope", kWaitLimit).code() == StatusCode::kInvalidArgument);
  CHECK_FALSE(s.IsReduced("nope"));

  REQUIRE(s.Ready("a").ok());
  Status twice = s.Ready("a");
  CHECK(twice.code() == StatusCode::kFailedPrecondition);
  CHECK(twice.message().find("'a'") != std::string::npos);
  std::vector<float> late(2);
  CHECK(s.Register("late", View(late, DataType::kFloat32)).code() ==
        StatusCode::kFailedPrecondition);
  StatusOr<bool> stepped = s.Synchronize();
  REQUIRE(stepped.ok());
  CHECK_FALSE(*stepped);
  REQUIRE(s.Ready("a").ok());  // a new pass: Ready is allowed again
  stepped = s.Synchronize();
  REQUIRE(stepped.ok());
  CHECK(*stepped);
  CHECK(a == std::vector<float>(3, 1.0f));  // (1 + 1) / (2 passes x 1 rank)
}

TEST_CASE("GradientSync Synchronize names the gradients not marked ready, then recovers",
          "[runtime][gradient_sync]") {
  const int n = GENERATE(2, 3);
  Watchdog watchdog("gradient sync missing ready", std::chrono::seconds(60));
  LocalJob job(n);
  auto failures = job.RunOnAllRanks([&](Runtime& rt) -> std::string {
    std::string error;
    auto sync = MakeSync(rt, {}, &error);
    if (!sync) return error;
    std::vector<float> a(5), b(6), c(7);
    error += Check(sync->Register("a", View(a, DataType::kFloat32)), "Register");
    error += Check(sync->Register("b", View(b, DataType::kFloat32)), "Register");
    error += Check(sync->Register("c", View(c, DataType::kFloat32)), "Register");
    if (!error.empty()) return error;
    if (auto e = Check(sync->Ready("a"), "Ready a"); !e.empty()) return e;
    StatusOr<bool> stepped = sync->Synchronize();
    if (stepped.ok()) return "Synchronize succeeded without 'b' and 'c'";
    const std::string& message = stepped.status().message();
    if (stepped.status().code() != StatusCode::kFailedPrecondition ||
        message.find("'b', 'c'") == std::string::npos) {
      return "unexpected error: " + stepped.status().ToString();
    }
    // The failed step was dropped: a complete one works.
    std::fill(a.begin(), a.end(), 2.0f);
    std::fill(b.begin(), b.end(), static_cast<float>(rt.rank()));
    for (const char* name : {"c", "b", "a"}) {
      if (auto e = Check(sync->Ready(name), std::string("Ready ") + name); !e.empty()) return e;
    }
    if (auto e = SyncExpecting(*sync, true); !e.empty()) return e;
    error = Compare("a", a, [](int64_t) { return 2.0; });
    if (error.empty()) error = Compare("b", b, [&](int64_t) { return (n - 1) / 2.0; });
    return error;
  });
  CHECK(failures == std::vector<std::string>{});
}
