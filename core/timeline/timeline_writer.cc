#include "core/timeline/timeline_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/errno_status.h"

namespace kolo {
namespace {

// "No such file or directory (ENOENT)". glibc's strerrordesc_np/strerrorname_np return static
// strings: thread-safe, unlike strerror.
// Writes all of `text`; returns 0 or the errno of the failed write().
int WriteAll(int fd, const std::string& text) {
  size_t offset = 0;
  while (offset < text.size()) {
    ssize_t n = ::write(fd, text.data() + offset, text.size() - offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    offset += static_cast<size_t>(n);
  }
  return 0;
}

// Microseconds with up to 3 decimals, trailing zeros dropped: 1500 ns -> "1.5", 2000 ns -> "2".
void AppendMicros(std::chrono::nanoseconds duration, std::string* out) {
  int64_t ns = duration.count();
  if (ns < 0) {
    *out += '-';
    ns = -ns;
  }
  *out += std::to_string(ns / 1000);
  int fraction = static_cast<int>(ns % 1000);
  if (fraction == 0) return;
  char digits[8];
  std::snprintf(digits, sizeof(digits), ".%03d", fraction);
  std::string text(digits);
  while (text.back() == '0') text.pop_back();
  *out += text;
}

// {"name":"<name>","ph":"M","pid":P,"args":<args>} without the separator.
std::string MetadataLine(const std::string& name, int pid, const std::string& args) {
  return "{\"name\":\"" + name + "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
         ",\"args\":" + args + "}";
}

void AppendProcess(int pid, const std::string& name, std::string* out) {
  *out += MetadataLine("process_name", pid, "{\"name\":\"" + JsonEscape(name) + "\"}") + ",\n";
  *out += MetadataLine("process_sort_index", pid, "{\"sort_index\":" + std::to_string(pid) + "}") +
          ",\n";
}

std::string HeaderText(const TimelineWriter::Config& config,
                       std::chrono::system_clock::time_point wall_start) {
  int64_t start_unix_us =
      std::chrono::duration_cast<std::chrono::microseconds>(wall_start.time_since_epoch()).count();
  std::string rank = std::to_string(config.rank);
  std::string text = "[\n";
  text +=
      MetadataLine("kolo_trace", config.rank,
                   "{\"version\":1,\"rank\":" + rank + ",\"size\":" + std::to_string(config.size) +
                       ",\"start_unix_us\":" + std::to_string(start_unix_us) + "}") +
      ",\n";
  AppendProcess(config.rank, "rank " + rank, &text);
  if (config.rank == 0) AppendProcess(kControllerTracePid, "controller", &text);
  return text;
}

bool IsKnownPhase(char phase) {
  return phase == 'B' || phase == 'E' || phase == 'X' || phase == 'i' || phase == 'M';
}

}  // namespace

StatusOr<std::unique_ptr<TimelineWriter>> TimelineWriter::Open(const Config& config) {
  int fd = ::open(config.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return InvalidArgument("cannot create timeline file '" + config.path +
                           "': " + ErrnoText(errno));
  }
  Clock::TimePoint origin = config.clock->Now();
  std::string header =
      HeaderText(config, config.wall_start.value_or(std::chrono::system_clock::now()));
  if (int err = WriteAll(fd, header); err != 0) {
    ::close(fd);
    return Internal("cannot write timeline file '" + config.path + "': " + ErrnoText(err));
  }
  std::unique_ptr<TimelineWriter> writer(
      new TimelineWriter(config, fd, origin, static_cast<int64_t>(header.size())));
  writer->thread_ = std::thread([w = writer.get()] { w->WriterLoop(); });
  return StatusOr<std::unique_ptr<TimelineWriter>>(std::move(writer));
}

TimelineWriter::TimelineWriter(const Config& config, int fd, Clock::TimePoint origin,
                               int64_t header_bytes)
    : config_(config), origin_(origin), fd_(fd), bytes_written_(header_bytes), last_ts_(origin) {}

TimelineWriter::~TimelineWriter() {
  Close();
}

void TimelineWriter::Record(TraceEvent event) {
  if (stopped_.load(std::memory_order_relaxed)) {
    ++dropped_;
    return;
  }
  bool wake = false;
  {
    MutexLock lock(&mu_);
    if (closing_ || queue_.size() >= config_.queue_capacity) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(event));
    // Once per batch, when it reaches a quarter of the queue: the writer looks every
    // kBatchPeriod anyway, and a small op must not pay a thread's wake-up.
    wake = queue_.size() == BatchEvents();
    ++accepted_;
  }
  if (wake) work_cv_.NotifyOne();
}

void TimelineWriter::Flush() {
  MutexLock lock(&mu_);
  const int64_t target = accepted_;
  if (done_ >= target) return;
  ++flushing_;
  work_cv_.NotifyOne();
  // Bounded by the writer thread, which hands back every event it took (written or dropped).
  done_cv_.Wait(&mu_, [&]() KOLO_REQUIRES(mu_) { return done_ >= target; });
  --flushing_;
}

void TimelineWriter::Close() {
  MutexLock close_lock(&close_mu_);
  if (closed_) return;
  closed_ = true;
  {
    MutexLock lock(&mu_);
    closing_ = true;
  }
  work_cv_.NotifyOne();
  thread_.join();  // the writer drains the queue before it exits
  if (status().ok()) {
    std::string unfinished = CloseOpenSpans();
    if (!unfinished.empty()) WriteOrFail(unfinished);
    std::string end = MetadataLine("kolo_trace_end", config_.rank,
                                   "{\"dropped_events\":" + std::to_string(dropped_.load()) +
                                       ",\"truncated\":" + (truncated_ ? "true" : "false") + "}");
    WriteOrFail(end + "\n]\n");
  }
  ::close(fd_);
  fd_ = -1;
}

Status TimelineWriter::status() const {
  MutexLock lock(&mu_);
  return error_;
}

void TimelineWriter::WriterLoop() {
  std::vector<TraceEvent> batch;
  for (;;) {
    {
      MutexLock lock(&mu_);
      // A batch is due at a quarter-full queue, a Flush or Close, or after kBatchPeriod.
      work_cv_.WaitFor(&mu_, kBatchPeriod, [this]() KOLO_REQUIRES(mu_) {
        return queue_.size() >= BatchEvents() || flushing_ > 0 || closing_;
      });
      if (queue_.empty()) {
        if (closing_) return;  // everything is written
        continue;
      }
    }
    if (config_.before_batch_for_test) config_.before_batch_for_test();
    {
      MutexLock lock(&mu_);
      batch.swap(queue_);
    }
    WriteBatch(batch);
    {
      MutexLock lock(&mu_);
      done_ += static_cast<int64_t>(batch.size());
    }
    done_cv_.NotifyAll();
    batch.clear();
  }
}

void TimelineWriter::WriteBatch(const std::vector<TraceEvent>& batch) {
  std::string out;
  int64_t dropped = 0;
  int64_t kept = 0;
  for (const TraceEvent& event : batch) {
    if (stopped_.load() || !IsKnownPhase(event.phase) || !Balance(event)) {
      ++dropped;
      continue;
    }
    size_t mark = out.size();
    AppendEvent(event, &out);
    if (bytes_written_ + static_cast<int64_t>(out.size()) > config_.max_bytes) {
      out.resize(mark);
      truncated_ = true;
      stopped_ = true;  // Record drops from now on, without queueing
      ++dropped;
      continue;
    }
    ++kept;
  }
  if (!out.empty() && !WriteOrFail(out)) dropped += kept;
  dropped_ += dropped;
}

void TimelineWriter::AppendEvent(const TraceEvent& event, std::string* out) {
  int tid = TrackId(event.pid, event.track, out);
  *out += "{\"name\":\"" + JsonEscape(event.name) + "\",\"ph\":\"";
  *out += event.phase;
  *out += '"';
  if (event.phase == 'i') {
    *out += ",\"s\":\"";
    *out += event.scope == 'g' ? 'g' : 't';
    *out += '"';
  }
  *out += ",\"pid\":" + std::to_string(event.pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":";
  AppendMicros(event.start - origin_, out);
  if (event.phase == 'X') {
    *out += ",\"dur\":";
    AppendMicros(event.end - event.start, out);
  }
  if (!event.args_json.empty()) *out += ",\"args\":" + event.args_json;
  *out += "},\n";
}

bool TimelineWriter::Balance(const TraceEvent& event) {
  if (event.start > last_ts_) last_ts_ = event.start;
  if (event.phase != 'B' && event.phase != 'E') return true;
  std::vector<std::string>& open = open_spans_[{event.pid, event.track}];
  if (event.phase == 'B') {
    open.push_back(event.name);
    return true;
  }
  if (open.empty()) return false;  // its B was recorded before this file was opened
  open.pop_back();
  return true;
}

std::string TimelineWriter::CloseOpenSpans() {
  std::string out;
  for (auto& [key, open] : open_spans_) {
    while (!open.empty()) {
      TraceEvent end;
      end.phase = 'E';
      end.pid = key.first;
      end.track = key.second;
      end.name = open.back();
      end.start = last_ts_;
      end.args_json = "{\"unfinished\":true}";
      AppendEvent(end, &out);
      open.pop_back();
    }
  }
  return out;
}

int TimelineWriter::TrackId(int pid, const std::string& track, std::string* out) {
  if (track.empty()) return 0;  // global instants: no track of their own
  auto [it, inserted] = tids_.try_emplace({pid, track}, 0);
  if (!inserted) return it->second;
  it->second = ++last_tid_[pid];
  *out += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
          ",\"tid\":" + std::to_string(it->second) + ",\"args\":{\"name\":\"" + JsonEscape(track) +
          "\"}},\n";
  return it->second;
}

bool TimelineWriter::WriteOrFail(const std::string& text) {
  int err = WriteAll(fd_, text);
  if (err == 0) {
    bytes_written_ += static_cast<int64_t>(text.size());
    return true;
  }
  stopped_ = true;
  MutexLock lock(&mu_);
  if (error_.ok()) {
    error_ = Internal("cannot write timeline file '" + config_.path + "': " + ErrnoText(err));
  }
  return false;
}

std::string TimelinePathForRank(const std::string& path, int rank) {
  std::string tag = ".rank" + std::to_string(rank);
  size_t slash = path.rfind('/');
  size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = path.rfind('.');
  // No dot in the file name itself (a dot in a directory does not count), or only a leading
  // one (".trace"): no extension, append.
  if (dot == std::string::npos || dot <= name_start) return path + tag;
  return path.substr(0, dot) + tag + path.substr(dot);
}

}  // namespace kolo
