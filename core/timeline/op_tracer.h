// OpTracer: writes the rank side of the timeline (docs/TIMELINE.md): an op span per tensor from
// enqueue to the end of its callback, containing QUEUE, the executor's phases and CALLBACK.
// The runtime opens the span at enqueue (any thread); the background loop records the rest.
// Thread-safe: the slot table has its own mutex, and the hub is thread-safe.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/executor.h"
#include "core/mutex.h"
#include "core/tensor_entry.h"
#include "core/timeline/timeline_hub.h"

namespace kolo {

class OpTracer {
 public:
  // `hub` may be null (nothing is traced); it must outlive the tracer.
  OpTracer(TimelineHub* hub, int rank) : hub_(hub), rank_(rank) {}

  // Opens the op span of `entry` before it is queued, on a track named after the tensor. A
  // span of the same name still open (a callback or a blocking loop enqueues the name again
  // before the previous span ended) puts this one on "name #2", so spans never overlap on a
  // track. Entries begun while tracing is off, or under an earlier Start, are not traced.
  void Begin(TensorEntry& entry);
  // Closes the span of an entry whose enqueue failed.
  void Abandon(TensorEntry& entry, const Status& why);

  // Whether `entry` (any of `entries`) had its span opened (Begin while a timeline was on).
  // Untraced ops skip the tracer's clock reads (~55 cycles each, several per op: a small op's
  // path).
  static bool Opened(const TensorEntry& entry) { return entry.trace_generation != 0; }
  static bool AnyOpened(const std::vector<TensorEntry*>& entries);

  // QUEUE for each traced entry: enqueue until the background thread took up its response.
  void Taken(const std::vector<TensorEntry*>& entries, Clock::TimePoint now) const;

  // Closes the span after the callback ran from `callback_start` to `callback_end`. `response`
  // is the decision the entry completed with (null when it failed outside one, e.g. an abort).
  void Completed(const TensorEntry& entry, const Status& status, const Response* response,
                 Clock::TimePoint callback_start, Clock::TimePoint callback_end);

  // Reports each executor phase on the track of every traced entry of one response.
  class Phases final : public PhaseObserver {
   public:
    Phases(const OpTracer& tracer, const std::vector<TensorEntry*>& entries)
        : tracer_(tracer), entries_(entries) {}
    void OnPhase(const char* name, Clock::TimePoint start, Clock::TimePoint end) override;

   private:
    const OpTracer& tracer_;
    const std::vector<TensorEntry*>& entries_;
  };

 private:
  // True while `entry`'s span belongs to the file being written now.
  bool Traced(const TensorEntry& entry) const;
  void RecordComplete(const TensorEntry& entry, const char* name, Clock::TimePoint start,
                      Clock::TimePoint end) const;
  void RecordEnd(const TensorEntry& entry, Clock::TimePoint at, std::string args_json) const;
  void ReleaseSlot(const TensorEntry& entry);

  TimelineHub* const hub_;
  const int rank_;

  Mutex mu_;
  std::unordered_map<std::string, std::vector<bool>> slots_ KOLO_GUARDED_BY(mu_);  // name -> in use
};

// "ALLREDUCE" for OpType::kAllreduce, and so on.
std::string OpSpanName(OpType op);

}  // namespace kolo
