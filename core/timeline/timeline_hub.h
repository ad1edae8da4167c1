// TimelineHub: one rank's TraceSink (docs/TIMELINE.md). The runtime owns it and starts and
// stops it (KOLO_TIMELINE, kolo::start_timeline/stop_timeline); the controller, the background
// loop and the executor record through it. Thread-safe: Record and enabled() from any thread
// never wait on file I/O; Start and Stop block on it and are serialized with each other.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/timeline/timeline_writer.h"
#include "core/trace_sink.h"
#include "kolo/status.h"

namespace kolo {

class TimelineHub final : public TraceSink {
 public:
  // `clock` must outlive the hub. Tracing starts off.
  TimelineHub(int rank, int size, Clock* clock);
  ~TimelineHub() override;  // Stop()

  // Opens TimelinePathForRank(path, rank) and starts recording into it. Blocks on creating
  // the file. OK without doing anything if already started with the same `path` (Horovod's
  // start_timeline allows that); FailedPrecondition if started with another; the writer's
  // error if the file cannot be created.
  Status Start(const std::string& path);

  // Stops recording and hands the open writer to the caller to Close (nullptr if none):
  // quick, never touches the file, so the background thread may call it.
  std::shared_ptr<TimelineWriter> Detach();

  // The best estimate of (controller wall clock - this rank's wall clock), in µs, and the
  // round trip it came from. Written into the open file (and every later one) as a
  // kolo_clock metadata event, which kolo-timeline merge uses to align hosts. Any thread.
  void SetClockOffset(double offset_us, double rtt_us);

  // Counts Starts: an op begun under one generation is not continued in a later file.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // Stops recording, drains what was recorded and closes the file. Blocks until it is
  // written. OK if not started; otherwise the first write error of that file, if any.
  Status Stop();

  bool enabled() const override { return enabled_.load(std::memory_order_relaxed); }

  // Forwards to the open file's writer; a no-op while stopped.
  void Record(TraceEvent event) override;

  // KOLO_TIMELINE_MAX_MB in bytes; applies from the next Start.
  void set_max_bytes(int64_t bytes) { max_bytes_.store(bytes, std::memory_order_relaxed); }

 private:
  // Constant after construction.
  const int rank_;
  const int size_;
  Clock* const clock_;

  std::atomic<bool> enabled_{false};
  std::atomic<uint64_t> generation_{0};
  Mutex clock_mu_;
  bool has_clock_ KOLO_GUARDED_BY(clock_mu_) = false;
  double clock_offset_us_ KOLO_GUARDED_BY(clock_mu_) = 0;
  double clock_rtt_us_ KOLO_GUARDED_BY(clock_mu_) = 0;
  void RecordClock();  // a kolo_clock event with the current estimate, if any
  std::atomic<int64_t> max_bytes_{1024LL << 20};

  // Held across the whole of Start and Stop (file I/O included), never by Record.
  Mutex control_mu_;
  std::string path_ KOLO_GUARDED_BY(control_mu_);  // Start's path; meaningful while writer_ is set
  // Held only to copy or swap writer_, so Record waits at most for that.
  Mutex mu_;
  std::shared_ptr<TimelineWriter> writer_ KOLO_GUARDED_BY(mu_);  // null while stopped
};

}  // namespace kolo
