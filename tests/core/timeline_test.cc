#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>
#include <vector>

#include "core/timeline/timeline_hub.h"
#include "core/timeline/timeline_writer.h"
#include "tests/support/temp_dir.h"

using namespace kolo;
using std::chrono::nanoseconds;

namespace {

using kolo::testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int CountLinesWith(const std::string& text, const std::string& needle) {
  int count = 0;
  for (const std::string& line : Lines(text)) count += line.find(needle) != std::string::npos;
  return count;
}

// Strict JSON syntax check (RFC 8259 grammar; numbers checked loosely).
class JsonChecker {
 public:
  static bool Valid(const std::string& text) {
    JsonChecker checker(text);
    return checker.Value() && (checker.SkipSpace(), checker.pos_ == text.size());
  }

 private:
  explicit JsonChecker(const std::string& text) : s_(text) {}
  void SkipSpace() {
    while (pos_ < s_.size() && std::strchr(" \t\r\n", s_[pos_]) != nullptr) ++pos_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ >= s_.size() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool Literal(const char* word) {
    if (s_.compare(pos_, std::strlen(word), word) != 0) return false;
    pos_ += std::strlen(word);
    return true;
  }
  bool Value() {
    SkipSpace();
    if (pos_ >= s_.size()) return false;
    if (s_[pos_] == '{' || s_[pos_] == '[') return Container();
    if (s_[pos_] == '"') return String();
    if (Literal("true") || Literal("false") || Literal("null")) return true;
    size_t start = pos_;
    while (pos_ < s_.size() && std::strchr("+-.eE0123456789", s_[pos_]) != nullptr) ++pos_;
    return pos_ > start && std::isdigit(static_cast<unsigned char>(s_[pos_ - 1]));
  }
  bool Container() {
    char close = s_[pos_++] == '{' ? '}' : ']';
    if (Eat(close)) return true;
    do {
      if (close == '}' && !(String() && Eat(':'))) return false;
      if (!Value()) return false;
    } while (Eat(','));
    return Eat(close);
  }
  bool String() {
    if (!Eat('"')) return false;
    while (pos_ < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\' || pos_ >= s_.size()) continue;
      char escape = s_[pos_++];
      if (escape == 'u') {
        for (int i = 0; i < 4; ++i, ++pos_) {
          if (pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_]))) {
            return false;
          }
        }
      } else if (std::strchr("\"\\/bfnrt", escape) == nullptr) {
        return false;
      }
    }
    return false;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

TraceEvent Event(char phase, int pid, std::string track, std::string name, Clock::TimePoint start,
                 std::string args = "") {
  TraceEvent event;
  event.phase = phase;
  event.pid = pid;
  event.track = std::move(track);
  event.name = std::move(name);
  event.start = start;
  event.end = start;
  event.args_json = std::move(args);
  return event;
}

TraceEvent Span(int pid, std::string track, std::string name, Clock::TimePoint start,
                Clock::TimePoint end) {
  TraceEvent event = Event('X', pid, std::move(track), std::move(name), start);
  event.end = end;
  return event;
}

TimelineWriter::Config TestConfig(const std::string& path, int rank, ManualClock* clock) {
  TimelineWriter::Config config;
  config.path = path;
  config.rank = rank;
  config.size = 2;
  config.clock = clock;
  config.wall_start = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  return config;
}

std::unique_ptr<TimelineWriter> OpenOrDie(const TimelineWriter::Config& config) {
  auto writer = TimelineWriter::Open(config);
  if (!writer.ok()) FAIL(writer.status().ToString());
  return std::move(writer).value();
}

}  // namespace

TEST_CASE("A scripted sequence produces exactly the documented file", "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  ManualClock clock;
  auto writer = OpenOrDie(TestConfig(dir.File("t.json"), 0, &clock));
  const int ctl = kControllerTracePid;
  clock.Advance(nanoseconds(1000));
  writer->Record(Event('B', 0, "grad/w1", "ALLREDUCE", clock.Now(),
                       R"({"dtype":"float32","shape":"[2, 3]","bytes":24})"));
  clock.Advance(nanoseconds(500));
  writer->Record(Event('B', ctl, "grad/w1", "NEGOTIATE_ALLREDUCE", clock.Now()));
  writer->Record(Event('i', ctl, "grad/w1", "0", clock.Now()));
  clock.Advance(nanoseconds(250));
  writer->Record(Event('i', ctl, "grad/w1", "1", clock.Now()));
  writer->Record(
      Event('E', ctl, "grad/w1", "NEGOTIATE_ALLREDUCE", clock.Now(), R"({"last_rank":1})"));
  TraceEvent cycle = Event('i', ctl, "", "CYCLE", clock.Now(), R"({"responses":1,"tensors":1})");
  cycle.scope = 'g';
  writer->Record(cycle);
  Clock::TimePoint start = clock.Now();
  clock.Advance(nanoseconds(1'000'001));
  writer->Record(Span(0, "grad/w1", "RING_ALLREDUCE", start, clock.Now()));
  writer->Record(Event('E', 0, "grad/w1", "ALLREDUCE", clock.Now(), R"({"seq":0,"status":"OK"})"));
  writer->Close();
  writer->Close();  // idempotent

  const char* expected = R"json([
{"name":"kolo_trace","ph":"M","pid":0,"args":{"version":1,"rank":0,"size":2,"start_unix_us":1700000000000000}},
{"name":"process_name","ph":"M","pid":0,"args":{"name":"rank 0"}},
{"name":"process_sort_index","ph":"M","pid":0,"args":{"sort_index":0}},
{"name":"process_name","ph":"M","pid":1000000,"args":{"name":"controller"}},
{"name":"process_sort_index","ph":"M","pid":1000000,"args":{"sort_index":1000000}},
{"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"grad/w1"}},
{"name":"ALLREDUCE","ph":"B","pid":0,"tid":1,"ts":1,"args":{"dtype":"float32","shape":"[2, 3]","bytes":24}},
{"name":"thread_name","ph":"M","pid":1000000,"tid":1,"args":{"name":"grad/w1"}},
{"name":"NEGOTIATE_ALLREDUCE","ph":"B","pid":1000000,"tid":1,"ts":1.5},
{"name":"0","ph":"i","s":"t","pid":1000000,"tid":1,"ts":1.5},
{"name":"1","ph":"i","s":"t","pid":1000000,"tid":1,"ts":1.75},
{"name":"NEGOTIATE_ALLREDUCE","ph":"E","pid":1000000,"tid":1,"ts":1.75,"args":{"last_rank":1}},
{"name":"CYCLE","ph":"i","s":"g","pid":1000000,"tid":0,"ts":1.75,"args":{"responses":1,"tensors":1}},
{"name":"RING_ALLREDUCE","ph":"X","pid":0,"tid":1,"ts":1.75,"dur":1000.001},
{"name":"ALLREDUCE","ph":"E","pid":0,"tid":1,"ts":1001.751,"args":{"seq":0,"status":"OK"}},
{"name":"kolo_trace_end","ph":"M","pid":0,"args":{"dropped_events":0,"truncated":false}}
]
)json";
  std::string text = ReadFile(dir.File("t.json"));
  CHECK(text == expected);
  CHECK(JsonChecker::Valid(text));
  CHECK(writer->dropped() == 0);
  CHECK(writer->status().ok());
}

TEST_CASE("Each (pid, track) gets a stable tid and one thread_name line", "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  ManualClock clock;
  auto writer = OpenOrDie(TestConfig(dir.File("t.json"), 1, &clock));
  for (const char* track : {"a", "grad/\"b\"", "a", "grad/\"b\"", "a"}) {
    writer->Record(Event('i', 1, track, "tick", clock.Now()));
  }
  writer->Record(Event('i', kControllerTracePid, "a", "tick", clock.Now()));
  writer->Close();

  std::string text = ReadFile(dir.File("t.json"));
  CHECK(JsonChecker::Valid(text));
  CHECK(CountLinesWith(text, "\"thread_name\"") == 3);
  CHECK(CountLinesWith(text, R"("pid":1,"tid":1,"args":{"name":"a"})") == 1);
  CHECK(CountLinesWith(text, R"("pid":1,"tid":2,"args":{"name":"grad/\"b\""})") == 1);
  CHECK(CountLinesWith(text, R"("pid":1000000,"tid":1,"args":{"name":"a"})") == 1);
  CHECK(CountLinesWith(text, R"("pid":1,"tid":1,"ts")") == 3);
  CHECK(CountLinesWith(text, R"("pid":1,"tid":2,"ts")") == 2);
  CHECK(CountLinesWith(text, "\"controller\"") == 0);  // only rank 0 names the controller
}

TEST_CASE("Spans cut by starting or stopping mid-op stay balanced", "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  ManualClock clock;
  auto writer = OpenOrDie(TestConfig(dir.File("t.json"), 0, &clock));
  // An end whose begin went to an earlier file, then a span still open at Close.
  writer->Record(Event('E', kControllerTracePid, "x", "NEGOTIATE_ALLREDUCE", clock.Now()));
  clock.Advance(nanoseconds(1000));
  writer->Record(Event('B', 0, "y", "ALLREDUCE", clock.Now()));
  clock.Advance(nanoseconds(2000));
  writer->Record(Event('i', 0, "y", "tick", clock.Now()));
  writer->Close();

  std::string text = ReadFile(dir.File("t.json"));
  CHECK(JsonChecker::Valid(text));
  CHECK(CountLinesWith(text, "NEGOTIATE_ALLREDUCE") == 0);
  CHECK(CountLinesWith(text, R"({"name":"ALLREDUCE","ph":"E","pid":0,"tid":1,"ts":3,)"
                             R"("args":{"unfinished":true}})") == 1);
  CHECK(CountLinesWith(text, R"("dropped_events":1)") == 1);
}

TEST_CASE("JsonEscape escapes quotes, backslashes and control characters", "[core][timeline]") {
  CHECK(JsonEscape("grad/\"w\"") == "grad/\\\"w\\\"");
  CHECK(JsonEscape("a\\b") == "a\\\\b");
  CHECK(JsonEscape("line\nnext\ttab") == "line\\u000anext\\u0009tab");
  CHECK(JsonEscape(std::string("\x01\x1f\0z", 4)) == "\\u0001\\u001f\\u0000z");
  CHECK(JsonEscape("\xc3\xa9t\xc3\xa9 \xe2\x9c\x93") == "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93");
  CHECK(JsonEscape("") == "");
  // Invalid UTF-8 (a lone continuation byte, a truncated sequence, an overlong form, a
  // surrogate) is replaced, so one odd tensor name cannot make the file unreadable.
  CHECK(JsonEscape("a\x80"
                   "z") == "a\\ufffdz");
  CHECK(JsonEscape("\xe2\x9c") == "\\ufffd\\ufffd");
  CHECK(JsonEscape("\xc0\xaf") == "\\ufffd\\ufffd");
  CHECK(JsonEscape("\xed\xa0\x80") == "\\ufffd\\ufffd\\ufffd");
  CHECK(JsonEscape("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");
}

TEST_CASE("Each rank's file name gets .rank<r> before the last extension", "[core][timeline]") {
  auto [path, expected] = GENERATE(table<std::string, std::string>({
      {"trace.json", "trace.rank3.json"},
      {"dir.v2/trace", "dir.v2/trace.rank3"},
      {"a.b.json", "a.b.rank3.json"},
      {"trace", "trace.rank3"},
      {"/tmp/x.d/.trace", "/tmp/x.d/.trace.rank3"},
      {"/tmp/out/trace.json", "/tmp/out/trace.rank3.json"},
  }));
  CHECK(TimelinePathForRank(path, 3) == expected);
}

TEST_CASE("A file that cannot be created fails with its path and the OS error",
          "[core][timeline]") {
  ManualClock clock;
  auto writer = TimelineWriter::Open(TestConfig("/nonexistent-kolo-dir/t.json", 0, &clock));
  REQUIRE_FALSE(writer.ok());
  CHECK_THAT(writer.status().message(), Catch::Contains("'/nonexistent-kolo-dir/t.json'") &&
                                            Catch::Contains("No such file or directory"));
}

TEST_CASE("A full queue drops events, counts them and reports them at the end",
          "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  ManualClock clock;
  TimelineWriter::Config config = TestConfig(dir.File("t.json"), 0, &clock);
  config.queue_capacity = 4;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  // The writer cannot take anything off the queue until the test releases it.
  config.before_batch_for_test = [released] { released.wait(); };
  auto writer = OpenOrDie(config);
  for (int i = 0; i < 10; ++i) writer->Record(Event('i', 0, "t", "e", clock.Now()));
  CHECK(writer->dropped() == 6);
  release.set_value();
  writer->Close();

  std::string text = ReadFile(dir.File("t.json"));
  CHECK(writer->dropped() == 6);
  CHECK(CountLinesWith(text, R"("name":"e")") == 4);
  CHECK(CountLinesWith(text, R"("dropped_events":6,"truncated":false)") == 1);
  CHECK(JsonChecker::Valid(text));
}

TEST_CASE("At the size limit the writer stops, and the file stays valid", "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  ManualClock clock;
  TimelineWriter::Config config = TestConfig(dir.File("t.json"), 0, &clock);
  config.max_bytes = 1000;
  auto writer = OpenOrDie(config);
  const int kEvents = 100;
  for (int i = 0; i < kEvents; ++i) {
    writer->Record(Span(0, "grad/w1", "RING_ALLREDUCE", clock.Now(), clock.Now()));
  }
  writer->Close();

  std::string text = ReadFile(dir.File("t.json"));
  int written = CountLinesWith(text, "RING_ALLREDUCE");
  CHECK(written > 0);
  CHECK(writer->dropped() > 0);
  CHECK(written + writer->dropped() == kEvents);
  CHECK(CountLinesWith(text, R"("truncated":true)") == 1);
  CHECK(text.size() < 1000 + 120);  // the limit plus the end metadata
  CHECK(text.substr(text.size() - 4) == "}\n]\n");
  CHECK(JsonChecker::Valid(text));
}

TEST_CASE("A few events reach the file within the batch period, unflushed", "[core][timeline]") {
  // Record does not wake the writer for them (a small op must not pay a thread's wake-up): the
  // writer finds them on its own within TimelineWriter::kBatchPeriod.
  TempDir dir("kolo_timeline_");
  ManualClock clock;
  auto writer = OpenOrDie(TestConfig(dir.File("t.json"), 0, &clock));
  writer->Record(Event('i', 0, "grad/w", "tick", clock.Now()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (CountLinesWith(ReadFile(dir.File("t.json")), R"("name":"tick")") == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(CountLinesWith(ReadFile(dir.File("t.json")), R"("name":"tick")") == 1);
  writer->Close();
}

TEST_CASE("Flush returns once every event recorded before it is in the file", "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  ManualClock clock;
  auto writer = OpenOrDie(TestConfig(dir.File("t.json"), 0, &clock));
  for (int i = 0; i < 3; ++i) writer->Record(Event('i', 0, "grad/w", "tick", clock.Now()));
  writer->Flush();
  CHECK(CountLinesWith(ReadFile(dir.File("t.json")), R"("name":"tick")") == 3);
  writer->Close();
}

TEST_CASE("A writer killed mid-trace leaves whole lines and every flushed event",
          "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  const std::string path = dir.File("killed.json");
  const int kFlushed = 200;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Child: no Catch2 here. Flush kFlushed events, say so, then keep recording until killed.
    ::alarm(30);  // watchdog if the parent is gone
    ::close(pipe_fds[0]);
    TimelineWriter::Config config;
    config.path = path;
    auto opened = TimelineWriter::Open(config);
    if (!opened.ok()) ::_exit(2);
    TimelineWriter& writer = **opened;
    for (int i = 0; i < kFlushed; ++i) {
      writer.Record(
          Event('i', 0, "grad/w" + std::to_string(i % 7), "tick", SteadyClock::Get()->Now()));
    }
    writer.Flush();
    if (::write(pipe_fds[1], "x", 1) != 1) ::_exit(3);
    for (int64_t i = 0;; ++i) {
      writer.Record(Span(0, "grad/w" + std::to_string(i % 7), "RING_ALLREDUCE",
                         SteadyClock::Get()->Now(), SteadyClock::Get()->Now()));
    }
  }
  ::close(pipe_fds[1]);
  pollfd ready{pipe_fds[0], POLLIN, 0};
  char byte = 0;
  bool reported = ::poll(&ready, 1, 30'000) == 1 && ::read(pipe_fds[0], &byte, 1) == 1;
  if (!reported) ::kill(child, SIGKILL);  // do not leave it running; REQUIRE below fails
  ::close(pipe_fds[0]);
  // Kill while the writer is busy: once the file has grown past the flushed part (bounded).
  auto flushed_size = std::filesystem::file_size(path);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::filesystem::file_size(path) < flushed_size + (64 << 10) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ::kill(child, SIGKILL);
  int wait_status = 0;
  REQUIRE(::waitpid(child, &wait_status, 0) == child);
  REQUIRE(reported);
  CHECK((WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL));

  std::string text = ReadFile(path);
  REQUIRE(text.rfind("[\n", 0) == 0);
  std::vector<std::string> lines = Lines(text);
  bool last_is_partial = text.back() != '\n';
  size_t complete = lines.size() - (last_is_partial ? 1 : 0);
  int ticks = 0;
  std::string first_bad;  // the first complete line that is not a whole `{...},`
  for (size_t i = 1; i < complete; ++i) {
    const std::string& line = lines[i];
    bool whole = line.size() > 2 && line.compare(line.size() - 2, 2, "},") == 0 &&
                 JsonChecker::Valid(line.substr(0, line.size() - 1));
    if (!whole && first_bad.empty()) first_bad = line;
    ticks += line.find(R"("name":"tick")") != std::string::npos;
  }
  CHECK(first_bad == "");
  CHECK(ticks == kFlushed);
  CHECK(text.find("kolo_trace_end") == std::string::npos);
}

TEST_CASE("The hub writes one file per Start, and records nothing while stopped",
          "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  ManualClock clock;
  TimelineHub hub(1, 2, &clock);
  CHECK_FALSE(hub.enabled());
  CHECK(hub.generation() == 0);
  hub.Record(Event('i', 1, "t", "before", clock.Now()));  // no-op
  CHECK(hub.Stop().ok());                                 // not started: OK

  REQUIRE(hub.Start(dir.File("first.json")).ok());
  CHECK(hub.enabled());
  CHECK(hub.generation() == 1);
  hub.Record(Event('i', 1, "t", "one", clock.Now()));
  Status other = hub.Start(dir.File("other.json"));
  CHECK(other.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(other.message(), Catch::Contains("first.json"));
  // The same path again (Horovod's tests do it): the same file and generation go on.
  CHECK(hub.Start(dir.File("first.json")).ok());
  CHECK(hub.generation() == 1);
  hub.Record(Event('i', 1, "t", "one more", clock.Now()));
  REQUIRE(hub.Stop().ok());
  CHECK_FALSE(hub.enabled());
  std::string first = ReadFile(dir.File("first.rank1.json"));
  hub.Record(Event('i', 1, "t", "stopped", clock.Now()));  // no-op

  REQUIRE(hub.Start(dir.File("second.json")).ok());
  hub.Record(Event('i', 1, "t", "two", clock.Now()));
  REQUIRE(hub.Stop().ok());

  std::string second = ReadFile(dir.File("second.rank1.json"));
  CHECK(ReadFile(dir.File("first.rank1.json")) == first);
  CHECK(JsonChecker::Valid(first));
  CHECK(JsonChecker::Valid(second));
  CHECK(CountLinesWith(first, R"("name":"one")") == 1);
  CHECK(CountLinesWith(first, R"("name":"one more")") == 1);
  CHECK(CountLinesWith(second, R"("name":"two")") == 1);
  for (const char* name : {"before", "stopped", "\"one\"\n"}) {
    CHECK(second.find(name) == std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(dir.File("other.rank1.json")));
}

TEST_CASE("Records racing with Start and Stop leave every file valid", "[core][timeline]") {
  TempDir dir("kolo_timeline_");
  TimelineHub hub(0, 1, SteadyClock::Get());
  std::atomic<bool> done{false};
  std::vector<std::thread> recorders;
  for (int t = 0; t < 2; ++t) {
    recorders.emplace_back([&hub, &done, t] {
      while (!done.load()) {
        hub.Record(Event('i', 0, "track" + std::to_string(t), "e", SteadyClock::Get()->Now()));
      }
    });
  }
  for (int round = 0; round < 5; ++round) {
    // CHECK, not REQUIRE: the recorder threads must be joined whatever happens.
    CHECK(hub.Start(dir.File("race" + std::to_string(round) + ".json")).ok());
    CHECK(hub.Stop().ok());
  }
  done = true;
  for (std::thread& recorder : recorders) recorder.join();
  for (int round = 0; round < 5; ++round) {
    CHECK(JsonChecker::Valid(ReadFile(dir.File("race" + std::to_string(round) + ".rank0.json"))));
  }
}
