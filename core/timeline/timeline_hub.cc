#include "core/timeline/timeline_hub.h"

#include <cstdio>
#include <utility>

namespace kolo {

TimelineHub::TimelineHub(int rank, int size, Clock* clock)
    : rank_(rank), size_(size), clock_(clock) {}

TimelineHub::~TimelineHub() {
  // Write errors at destruction have no caller to go to; Stop's status is for those who ask.
  Stop().IgnoreError();
}

Status TimelineHub::Start(const std::string& path) {
  MutexLock control_lock(&control_mu_);
  {
    MutexLock lock(&mu_);
    if (writer_ != nullptr) {
      if (path == path_) return Status::Ok();
      return FailedPrecondition("start_timeline('" + path + "'): the timeline is already on, " +
                                "writing '" + path_ + "'; stop_timeline() first");
    }
  }
  TimelineWriter::Config config;
  config.path = TimelinePathForRank(path, rank_);
  config.rank = rank_;
  config.size = size_;
  config.max_bytes = max_bytes_.load();
  config.clock = clock_;
  auto writer = TimelineWriter::Open(config);
  if (!writer.ok()) return writer.status().WithContext("start_timeline");
  {
    MutexLock lock(&mu_);
    writer_ = std::move(writer).value();
  }
  path_ = path;
  generation_.fetch_add(1, std::memory_order_acq_rel);
  enabled_.store(true);
  RecordClock();
  return Status::Ok();
}

std::shared_ptr<TimelineWriter> TimelineHub::Detach() {
  enabled_.store(false);
  MutexLock lock(&mu_);
  std::shared_ptr<TimelineWriter> writer = std::move(writer_);
  writer_ = nullptr;
  return writer;
}

Status TimelineHub::Stop() {
  MutexLock control_lock(&control_mu_);
  std::shared_ptr<TimelineWriter> writer = Detach();
  if (writer == nullptr) return Status::Ok();
  // A Record holding its own copy of `writer` past this point finds it closed and drops.
  writer->Close();
  return writer->status().WithContext("stop_timeline");
}

void TimelineHub::Record(TraceEvent event) {
  if (!enabled()) return;
  std::shared_ptr<TimelineWriter> writer;
  {
    MutexLock lock(&mu_);
    writer = writer_;
  }
  if (writer != nullptr) writer->Record(std::move(event));
}

void TimelineHub::SetClockOffset(double offset_us, double rtt_us) {
  {
    MutexLock lock(&clock_mu_);
    has_clock_ = true;
    clock_offset_us_ = offset_us;
    clock_rtt_us_ = rtt_us;
  }
  RecordClock();
}

void TimelineHub::RecordClock() {
  if (!enabled()) return;
  TraceEvent event;
  {
    MutexLock lock(&clock_mu_);
    if (!has_clock_) return;
    char args[96];
    std::snprintf(args, sizeof(args), "{\"offset_us\":%.1f,\"rtt_us\":%.1f}", clock_offset_us_,
                  clock_rtt_us_);
    event.args_json = args;
  }
  event.phase = 'M';
  event.pid = rank_;
  event.name = "kolo_clock";
  event.start = clock_->Now();
  Record(std::move(event));
}

}  // namespace kolo
