// Tests of kolo-timeline's merge and summary on the hand-written 2-rank trace in
// tests/tools/data (see its README.md for the expected numbers), and of the command line.
// Reads the data files; writes only into a fresh temporary directory. No processes.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"
#include "tools/timeline/json_reader.h"
#include "tools/timeline/summary.h"
#include "tools/timeline/summary_format.h"
#include "tools/timeline/timeline_commands.h"
#include "tools/timeline/trace_merge.h"
#include "tools/timeline/trace_model.h"
#include "tools/timeline/trace_reader.h"
#include "tools/timeline/trace_set.h"

namespace kolo::timeline {
namespace {

const std::string kRank0 = std::string(KOLO_TIMELINE_TEST_DATA) + "/timeline_small.rank0.json";
const std::string kRank1 = std::string(KOLO_TIMELINE_TEST_DATA) + "/timeline_small.rank1.json";

// The events of one file as read, in order.
std::vector<JsonValue> ReadEvents(const std::string& path) {
  auto text = ReadFileText(path);
  REQUIRE(text.ok());
  std::vector<JsonValue> events;
  std::vector<std::string> warnings;
  REQUIRE(ReadTraceArray(
              *text, path,
              [&](JsonValue event, int) {
                events.push_back(std::move(event));
                return Status::Ok();
              },
              &warnings)
              .ok());
  return events;
}

using kolo::testing::TempDir;

double Number(const JsonValue& object, const char* key) {
  double value = -1;
  GetNumber(object, key, &value);
  return value;
}

std::string MergedText(const std::vector<std::string>& paths, std::vector<std::string>* warnings) {
  std::ostringstream out;
  REQUIRE(MergeTraceFiles(paths, out, warnings).ok());
  return out.str();
}

TEST_CASE("merge shifts each rank by its start time and writes one valid array",
          "[tools][timeline]") {
  std::vector<std::string> warnings;
  auto merged = ParseJson(MergedText({kRank0, kRank1}, &warnings));  // strict: needs the ']'
  REQUIRE(merged.ok());
  const std::vector<JsonValue> rank0 = ReadEvents(kRank0);
  const std::vector<JsonValue> rank1 = ReadEvents(kRank1);  // its truncated line is dropped
  const JsonValue::Array& events = merged->as_array();
  REQUIRE(events.size() == rank0.size() + rank1.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const bool from_rank0 = i < rank0.size();
    const JsonValue& original = from_rank0 ? rank0[i] : rank1[i - rank0.size()];
    CHECK(GetString(events[i], "name") == GetString(original, "name"));
    if (original.Find("ts") == nullptr) continue;
    CHECK(Number(events[i], "ts") == Number(original, "ts") + (from_rank0 ? 0 : 250));
  }
  const JsonValue& header1 = events[rank0.size()];
  REQUIRE(GetString(header1, "name") == "kolo_trace");
  CHECK(Number(*header1.Find("args"), "start_unix_us") == 1700000000000000.0);
  CHECK(Number(*header1.Find("args"), "merged_shift_us") == 250);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("timeline_small.rank1.json:31: dropped the truncated last line") !=
        std::string::npos);
}

TEST_CASE("merge corrects each host's clock by its measured offset, then drops it",
          "[tools][timeline]") {
  // Both ranks started at the same wall-clock reading, but rank 1's clock runs 400 µs behind
  // the controller's: its ts = 0 was at controller time start + 400.
  const std::string header = R"({"name":"kolo_trace","ph":"M","pid":R,"args":{"version":1,)"
                             R"("rank":R,"size":2,"start_unix_us":1700000000000000}},)";
  auto with_rank = [](std::string text, char rank) {
    for (char& c : text) c = c == 'R' ? rank : c;
    return text;
  };
  TempDir dir("kolo-timeline-test-");
  std::ofstream(dir.File("r0.json"))
      << "[\n"
      << with_rank(header, '0') << "\n"
      << R"({"name":"tick","ph":"i","s":"g","pid":0,"tid":0,"ts":10},)"
      << "\n";
  std::ofstream(dir.File("r1.json"))
      << "[\n"
      << with_rank(header, '1') << "\n"
      << R"({"name":"kolo_clock","ph":"M","pid":1,"tid":0,"ts":1,)"
      << R"("args":{"offset_us":100.0,"rtt_us":80.0}},)"
      << "\n"
      << R"({"name":"kolo_clock","ph":"M","pid":1,"tid":0,"ts":2,)"
      << R"("args":{"offset_us":400.0,"rtt_us":20.0}},)"
      << "\n"
      << R"({"name":"tick","ph":"i","s":"g","pid":1,"tid":0,"ts":10},)"
      << "\n";
  std::vector<std::string> warnings;
  auto merged = ParseJson(MergedText({dir.File("r0.json"), dir.File("r1.json")}, &warnings));
  REQUIRE(merged.ok());
  std::map<int64_t, double> tick_ts;
  int clock_events = 0;
  for (const JsonValue& event : merged->as_array()) {
    clock_events += GetString(event, "name") == "kolo_clock";
    int64_t pid = -1;
    GetInt(event, "pid", &pid);
    if (GetString(event, "name") == "tick") tick_ts[pid] = Number(event, "ts");
  }
  CHECK(tick_ts[0] == 10);
  CHECK(tick_ts[1] == 410);  // the last (best) estimate wins
  CHECK(clock_events == 0);
}

TEST_CASE("merge gives every track its own tid, named by one thread_name", "[tools][timeline]") {
  std::vector<std::string> warnings;
  auto merged = ParseJson(MergedText({kRank0, kRank1}, &warnings));
  REQUIRE(merged.ok());
  std::map<int64_t, std::pair<int64_t, std::string>> named;  // tid -> (pid, track name)
  for (const JsonValue& event : merged->as_array()) {
    int64_t pid = -1, tid = -1;
    if (GetString(event, "name") != "thread_name" || !GetInt(event, "tid", &tid)) continue;
    REQUIRE(GetInt(event, "pid", &pid));
    CHECK(named.count(tid) == 0);  // unique across pids, not only within one
    named[tid] = {pid, GetString(*event.Find("args"), "name")};
  }
  CHECK(named.size() == 6);  // grad/w1 and grad/b1 on the controller, rank 0 and rank 1
  CHECK(named.count(0) == 0);
  for (const JsonValue& event : merged->as_array()) {
    int64_t pid = -1, tid = -1;
    // Global instants (CYCLE) carry the writer's tid 0, which names no track.
    if (!GetInt(event, "tid", &tid) || GetString(event, "s") == "g") continue;
    REQUIRE(GetInt(event, "pid", &pid));
    REQUIRE(named.count(tid) == 1);
    CHECK(named[tid].first == pid);
  }
}

TEST_CASE("merge of a merged file changes nothing", "[tools][timeline]") {
  TempDir dir("kolo-timeline-test-");
  std::vector<std::string> warnings;
  const std::string once = MergedText({kRank0, kRank1}, &warnings);
  std::ofstream(dir.File("merged.json")) << once;
  CHECK(MergedText({dir.File("merged.json")}, &warnings) == once);
}

TEST_CASE("merge refuses the same rank twice and writes nothing", "[tools][timeline]") {
  std::ostringstream out;
  std::vector<std::string> warnings;
  Status status = MergeTraceFiles({kRank0, kRank0}, out, &warnings);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() == kRank0 + " is given twice (rank 0)");
  CHECK(out.str().empty());
}

TEST_CASE("ClassifyPhase: transfer is <ALGO>_<OP> of the op span; other work is kept apart",
          "[tools][timeline]") {
  CHECK(ClassifyPhase("QUEUE", "ALLREDUCE") == Phase::kQueue);
  CHECK(ClassifyPhase("MEMCPY_IN_FUSION_BUFFER", "ALLREDUCE") == Phase::kCopyIn);
  CHECK(ClassifyPhase("MEMCPY_OUT_FUSION_BUFFER", "ALLREDUCE") == Phase::kCopyOut);
  CHECK(ClassifyPhase("CALLBACK", "ALLREDUCE") == Phase::kCallback);
  CHECK(ClassifyPhase("RING_ALLREDUCE", "ALLREDUCE") == Phase::kTransfer);
  CHECK(ClassifyPhase("NCCL_ALLREDUCE", "ALLREDUCE") == Phase::kTransfer);
  CHECK(ClassifyPhase("RING_ALLGATHER", "ALLGATHER") == Phase::kTransfer);
  CHECK(ClassifyPhase("COPY_INPUT", "ALLREDUCE") == Phase::kCopyIn);     // single tensor
  CHECK(ClassifyPhase("SCALE_OUTPUT", "ALLREDUCE") == Phase::kCopyOut);  // single tensor
  CHECK(ClassifyPhase("ALLREDUCE", "ALLREDUCE") == Phase::kOther);
  CHECK(ClassifyPhase("RING_ALLREDUCE", "") == Phase::kTransfer);  // the B event was dropped
  CHECK(ClassifyPhase("SOMETHING_NEW", "") == Phase::kOther);
}

Summary SummaryOfTestTrace() {
  auto set = LoadTraceSet({kRank0, kRank1});
  REQUIRE(set.ok());
  return Summarize(BuildTraceModel(*set));
}

TEST_CASE("summary: negotiation waits and last ranks per tensor", "[tools][timeline]") {
  const Summary summary = SummaryOfTestTrace();
  REQUIRE(summary.tensors.size() == 2);
  const TensorWait& b1 = summary.tensors[0];  // most total wait first
  CHECK(b1.tensor == "grad/b1");
  CHECK(b1.op == "ALLREDUCE");
  CHECK(b1.wait.count == 2);
  CHECK(b1.wait.mean_us() == 400);
  CHECK(b1.wait.max_us == 500);
  CHECK(b1.wait.last_rank_counts == std::map<int, int64_t>{{1, 2}});  // one from the ticks
  const TensorWait& w1 = summary.tensors[1];
  CHECK(w1.tensor == "grad/w1");
  CHECK(w1.wait.mean_us() == 200);
  CHECK(w1.wait.max_us == 300);
  CHECK(w1.wait.last_rank_counts == std::map<int, int64_t>{{0, 1}, {1, 1}});
  CHECK(summary.all_negotiations.count == 4);
  CHECK(summary.all_negotiations.total_us == 1200);
  CHECK(summary.all_negotiations.last_rank_counts == std::map<int, int64_t>{{0, 1}, {1, 3}});
  REQUIRE(summary.stragglers.size() == 2);
  CHECK(summary.stragglers[0].rank == 0);
  CHECK(summary.stragglers[0].times_last == 1);
  CHECK(summary.stragglers[0].wait_caused_us == 100);
  CHECK(summary.stragglers[1].rank == 1);
  CHECK(summary.stragglers[1].times_last == 3);
  CHECK(summary.stragglers[1].wait_caused_us == 1100);
}

TEST_CASE("summary: phase wall times count fused phases once; bandwidth", "[tools][timeline]") {
  const Summary summary = SummaryOfTestTrace();
  REQUIRE(summary.per_rank.size() == 2);
  const std::vector<double> queue = {830, 150};
  for (int rank = 0; rank < 2; ++rank) {
    const RankTotals& totals = summary.per_rank[rank];
    CHECK(totals.rank == rank);
    CHECK(totals.us(Phase::kQueue) == queue[rank]);
    CHECK(totals.us(Phase::kCopyIn) == 30);
    CHECK(totals.us(Phase::kTransfer) == 416);
    CHECK(totals.us(Phase::kCopyOut) == 30);
    CHECK(totals.us(Phase::kCallback) == 45);
    CHECK(totals.copy_share() == Approx(60.0 / 476.0));
    CHECK(totals.transfer_share() == Approx(416.0 / 476.0));
    CHECK(totals.ops == 4);
    CHECK(totals.failed_ops == 0);
    CHECK(totals.bytes == 8320);
    CHECK(totals.bytes_per_second() == Approx(20e6));  // 8320 B / 416 us
  }
  CHECK(summary.all_ranks.us(Phase::kTransfer) == 832);
  CHECK(summary.all_ranks.bytes == 16640);
  CHECK(summary.all_ranks.bytes_per_second() == Approx(20e6));
  CHECK(summary.fusion.groups_by_size == std::map<int64_t, int64_t>{{1, 2}, {2, 1}});
  CHECK(summary.fusion.groups == 3);
  CHECK(summary.fusion.tensors == 4);
  CHECK(summary.begin_us == 100);
  CHECK(summary.end_us == 2561);
}

// Two training steps, 10 ms apart, as a backward pass with gradient hooks traces them: rank
// 0 enqueues one op at 0, 1, 2 ms of each step and each runs (transfer) right away; rank 1
// enqueues all three at the end of the step's work (2 ms), so nothing of its transfer runs
// before its last enqueue.
TraceModel TwoStepModel() {
  TraceModel model;
  model.ranks = {RankInfo{0, 2}, RankInfo{1, 2}};
  for (double step : {0.0, 10000.0}) {
    for (int i = 0; i < 3; ++i) {
      const double enqueue = step + 1000.0 * i;
      model.ops.push_back({0, "g" + std::to_string(i), "ALLREDUCE", enqueue, enqueue + 400});
      model.phases.push_back({0, Phase::kTransfer, enqueue + 100, enqueue + 300});
      const double late = step + 2000.0;
      const double run = late + 100.0 + 200.0 * i;
      model.ops.push_back({1, "g" + std::to_string(i), "ALLREDUCE", late, run + 200});
      model.phases.push_back({1, Phase::kTransfer, run, run + 200});
    }
  }
  model.begin_us = 0;
  model.end_us = 12700;
  return model;
}

TEST_CASE("summary: overlap of data movement with the work between enqueues, per step",
          "[tools][timeline]") {
  const Summary summary = Summarize(TwoStepModel());
  REQUIRE(summary.overlap.size() == 2);
  const OverlapStats& hooks = summary.overlap[0];
  CHECK(hooks.rank == 0);
  CHECK(hooks.steps == 2);
  CHECK(hooks.movement_us == Approx(1200));   // 3 x 200 us per step
  CHECK(hooks.overlapped_us == Approx(800));  // the first two ops' transfers of each step
  CHECK(hooks.overlapped_share() == Approx(2.0 / 3.0));
  CHECK(hooks.tail_per_step_us() == Approx(400));  // the last op: enqueued at 2000, done 2400
  const OverlapStats& late = summary.overlap[1];
  CHECK(late.rank == 1);
  CHECK(late.steps == 2);
  CHECK(late.movement_us == Approx(1200));
  CHECK(late.overlapped_us == 0);
  CHECK(late.overlapped_share() == 0);
  CHECK(late.tail_per_step_us() == Approx(700));
  const std::string text = FormatSummaryText(summary);
  CHECK(text.find("     0      2               0.600                66.7%                    "
                  "0.400\n") != std::string::npos);
  auto json = ParseJson(ToJson(SummaryToJson(summary)));
  REQUIRE(json.ok());
  REQUIRE(json->Find("overlap") != nullptr);
  CHECK(Number(json->Find("overlap")->as_array().at(1), "tail_per_step_us") == Approx(700));
}

TEST_CASE("summary: merged file and per-rank files give the same numbers", "[tools][timeline]") {
  TempDir dir("kolo-timeline-test-");
  std::vector<std::string> warnings;
  std::ofstream(dir.File("merged.json")) << MergedText({kRank0, kRank1}, &warnings);
  auto set = LoadTraceSet({dir.File("merged.json")});
  REQUIRE(set.ok());
  const Summary from_merged = Summarize(BuildTraceModel(*set));
  Summary from_ranks = SummaryOfTestTrace();
  from_ranks.warnings.clear();  // the merged file no longer has the truncated line
  CHECK(ToJson(SummaryToJson(from_merged)) == ToJson(SummaryToJson(from_ranks)));
}

TEST_CASE("summary text shows the tables; --json parses", "[tools][timeline]") {
  const Summary summary = SummaryOfTestTrace();
  const std::string text = FormatSummaryText(summary);
  CHECK(text.find("  grad/b1  ALLREDUCE      2  0.400  0.500  rank 1 (2)\n") != std::string::npos);
  CHECK(text.find("     1           3  75.0%             1.100\n") != std::string::npos);
  CHECK(text.find(
            "     0  0.830    0.030     0.416     0.030     0.045  0.000   12.6%       87.4%\n") !=
        std::string::npos);
  CHECK(text.find("20.00 MB/s") != std::string::npos);
  auto json = ParseJson(ToJson(SummaryToJson(summary)));
  REQUIRE(json.ok());
  CHECK(Number(*json->Find("phases")->Find("all"), "bytes_per_second") == Approx(20e6));
  CHECK(Number(*json->Find("negotiations")->Find("all"), "mean_wait_us") == 300);
}

// Runs the command line; returns the exit code and fills out / err.
int Run(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::ostringstream out_stream, err_stream;
  const int code = TimelineMain(args, out_stream, err_stream);
  *out = out_stream.str();
  *err = err_stream.str();
  return code;
}

TEST_CASE("the command line: usage errors exit 2 and say what is wrong", "[tools][timeline]") {
  using Case = std::pair<std::vector<std::string>, std::string>;
  auto [args, message] = GENERATE(values<Case>({
      {{}, "missing a command (merge, summary or plot)"},
      {{"stats", "a.json"}, "unknown command 'stats' (expected merge, summary or plot)"},
      {{"summary"}, "missing the trace files to read"},
      {{"summary", "--bogus", "a.json"}, "unknown option '--bogus' for summary"},
      {{"summary", "-o", "x", "a.json"}, "unknown option '-o' for summary"},
      {{"merge", "a.json"}, "missing -o OUTPUT (where merge writes its result)"},
      {{"merge", "a.json", "-o"}, "-o needs a value"},
      {{"merge", "--json", "-o", "x", "a.json"}, "unknown option '--json' for merge"},
      {{"plot", "-o", "x.svg", "--last-ms", "abc", "a.json"},
       "--last-ms must be a positive number of milliseconds, got 'abc'"},
      {{"plot", "-o", "x.svg", "--steps=0", "a.json"},
       "--steps must be an integer in [1, 1000], got '0'"},
      {{"plot", "-o", "x.svg", "--steps", "2", "--last-ms", "5", "a.json"},
       "give --last-ms or --steps, not both"},
  }));
  std::string out, err;
  CHECK(Run(args, &out, &err) == kExitUsage);
  CHECK(err.find("kolo-timeline: " + message + "\n") == 0);
  CHECK(err.find("--help' for usage.") != std::string::npos);
}

TEST_CASE("the command line: --help per command, exit 0", "[tools][timeline]") {
  std::string out, err;
  for (const char* command : {"merge", "summary", "plot"}) {
    CHECK(Run({command, "--help"}, &out, &err) == kExitOk);
    CHECK(out.find(std::string("Usage: kolo-timeline ") + command) == 0);
    CHECK(Run({"help", command}, &out, &err) == kExitOk);
    CHECK(out.find(std::string("Usage: kolo-timeline ") + command) == 0);
  }
  CHECK(Run({"--help"}, &out, &err) == kExitOk);
  CHECK(out.find("Commands:") != std::string::npos);
}

TEST_CASE("the command line: bad input exits 1 naming the file", "[tools][timeline]") {
  std::string out, err;
  CHECK(Run({"summary", "/nonexistent/t.json"}, &out, &err) == kExitBadInput);
  CHECK(err == "kolo-timeline: /nonexistent/t.json: cannot open: No such file or directory\n");
  CHECK(Run({"merge", "-o", "-", kRank0, kRank0}, &out, &err) == kExitBadInput);
  CHECK(out.empty());
}

TEST_CASE("the command line: merge writes its file whole, via a renamed temporary",
          "[tools][timeline]") {
  TempDir dir("kolo-timeline-test-");
  const std::string output = dir.File("trace.json");
  std::string out, err;
  REQUIRE(Run({"merge", "-o", output, kRank0, kRank1}, &out, &err) == kExitOk);
  CHECK(out == "wrote " + output + " (2 files merged)\n");
  CHECK(err.find("kolo-timeline: warning: ") == 0);  // rank 1's truncated line
  auto text = ReadFileText(output);
  REQUIRE(text.ok());
  CHECK(ParseJson(*text).ok());
  CHECK_FALSE(std::filesystem::exists(output + ".tmp"));
  const std::string failed = dir.File("failed.json");
  CHECK(Run({"merge", "-o", failed, kRank0, kRank0}, &out, &err) == kExitBadInput);
  CHECK_FALSE(std::filesystem::exists(failed));
  CHECK_FALSE(std::filesystem::exists(failed + ".tmp"));
}

}  // namespace
}  // namespace kolo::timeline
