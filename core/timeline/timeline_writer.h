// TimelineWriter: one rank's open trace file in the format of docs/TIMELINE.md. TimelineHub
// opens one per start_timeline and closes it on stop. Record may be called from any thread and
// never waits on file I/O: it appends to a bounded queue that the writer's own thread (started
// by Open, joined by Close) formats and writes a batch at a time, one write() per batch, so a
// killed process loses at most the batch in flight and what was recorded in the last
// kBatchPeriod, and leaves at most one partial last line. Record wakes the writer only when the
// queue is a quarter full (or a Flush or Close waits), else the writer looks every kBatchPeriod:
// a small op records about ten events, and waking a thread for each op cost it ~35 µs on a
// 2-core machine (docs/PERFORMANCE.md, "Timeline overhead").
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/trace_sink.h"
#include "kolo/status.h"

namespace kolo {

class TimelineWriter {
 public:
  // How long recorded events may wait for the writer thread when nothing wakes it.
  static constexpr std::chrono::milliseconds kBatchPeriod{50};

  struct Config {
    std::string path;  // the file itself (already per rank: see TimelinePathForRank)
    int rank = 0;      // the file's own pid; rank 0 also names the controller's pid
    int size = 1;
    int64_t max_bytes = 1024LL << 20;   // KOLO_TIMELINE_MAX_MB; events past it are dropped
    size_t queue_capacity = 65536;      // events waiting for the writer thread
    Clock* clock = SteadyClock::Get();  // ts 0 = clock->Now() at Open; must outlive the writer
    // Wall clock at ts 0 (kolo_trace's start_unix_us). Unset: system_clock::now() at Open, so
    // that the two clocks are read together even when the Config was built long before.
    std::optional<std::chrono::system_clock::time_point> wall_start;
    // Tests only: runs on the writer thread before it takes each batch off the queue, so a
    // test can hold the writer and fill the queue without sleeping.
    std::function<void()> before_batch_for_test;
  };

  // Creates or truncates config.path, writes `[` and the opening metadata (kolo_trace, process
  // names) and starts the writer thread. Blocks on that file I/O. Fails, naming the path and
  // the OS error, if the file cannot be created or written.
  static StatusOr<std::unique_ptr<TimelineWriter>> Open(const Config& config);

  ~TimelineWriter();  // Close()
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  // Any thread. Takes a short lock, never waits on I/O. Drops the event and counts it when the
  // queue is full, the size limit was reached, a write failed, or the writer is closed.
  void Record(TraceEvent event);

  // Blocks until every event recorded before the call is written (or dropped). Any thread.
  void Flush();

  // Drains the queue, writes kolo_trace_end (no trailing comma) and `]`, joins the writer
  // thread and closes the file, so that a clean close leaves strictly valid JSON. Blocks.
  // Idempotent and thread-safe; later Records are dropped.
  void Close();

  // Events dropped so far (queue full, size limit, write error, after Close). Any thread.
  int64_t dropped() const { return dropped_.load(); }

  // The first write error, naming the path; OK if none. Any thread.
  Status status() const;

 private:
  TimelineWriter(const Config& config, int fd, Clock::TimePoint origin, int64_t header_bytes);

  // Queued events that make a batch due at once: a quarter of the queue.
  size_t BatchEvents() const { return std::max<size_t>(1, config_.queue_capacity / 4); }
  void WriterLoop();
  // Formats `batch` (with thread_name lines for new tracks) and writes it with one write().
  void WriteBatch(const std::vector<TraceEvent>& batch);
  // Appends the event's line to `out`, preceded by a thread_name line for a new track.
  void AppendEvent(const TraceEvent& event, std::string* out);
  // Keeps B/E balanced (see open_spans_); false if `event` must be dropped.
  bool Balance(const TraceEvent& event);
  // E events for every span still open, marked unfinished.
  std::string CloseOpenSpans();
  int TrackId(int pid, const std::string& track, std::string* out);
  // Writes `text` at the end of the file; on failure records error_, stops recording and
  // returns false.
  bool WriteOrFail(const std::string& text);

  // Constant after construction.
  const Config config_;
  const Clock::TimePoint origin_;

  // Writer thread only; after it is joined, the thread calling Close.
  int fd_;
  int64_t bytes_written_;
  bool truncated_ = false;
  std::map<std::pair<int, std::string>, int> tids_;  // (pid, track) -> tid, from 1
  std::map<int, int> last_tid_;                      // pid -> last tid handed out
  // Spans begun and not yet ended, per (pid, track), innermost last: an E with no open B is
  // dropped, and Close ends what is still open, so every file is balanced even when tracing
  // starts or stops in the middle of an op or a negotiation.
  std::map<std::pair<int, std::string>, std::vector<std::string>> open_spans_;
  Clock::TimePoint last_ts_;  // latest event time written

  std::atomic<int64_t> dropped_{0};
  // Set by the writer thread at the size limit or on a write error: Record drops from then on.
  std::atomic<bool> stopped_{false};

  mutable Mutex mu_;
  CondVar work_cv_;  // with mu_: the writer waits for a quarter-full queue, a Flush or closing_
  CondVar done_cv_;  // with mu_: Flush waits for done_
  std::vector<TraceEvent> queue_ KOLO_GUARDED_BY(mu_);
  bool closing_ KOLO_GUARDED_BY(mu_) = false;
  int flushing_ KOLO_GUARDED_BY(mu_) = 0;      // Flush calls waiting
  int64_t accepted_ KOLO_GUARDED_BY(mu_) = 0;  // events ever queued
  int64_t done_ KOLO_GUARDED_BY(mu_) = 0;      // events taken off the queue and handled
  Status error_ KOLO_GUARDED_BY(mu_);          // the first write error

  Mutex close_mu_;  // serializes Close
  bool closed_ KOLO_GUARDED_BY(close_mu_) = false;
  std::thread thread_;  // started by Open, joined by Close
};

// The file rank `rank` writes for KOLO_TIMELINE=`path`: `.rank<r>` inserted before the last
// extension of the file name ("trace.json" -> "trace.rank3.json", "dir.v2/trace" ->
// "dir.v2/trace.rank3"). A leading dot (".trace") is not an extension.
std::string TimelinePathForRank(const std::string& path, int rank);

}  // namespace kolo
