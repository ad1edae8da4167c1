// OpTracer: writes the rank side of the timeline (docs/TIMELINE.md): an op span per tensor from
// enqueue to the end of its callback, containing QUEUE, the executor's phases and CALLBACK.
// The runtime records the span's start at enqueue (any thread); the background loop records
// the rest. Thread-safe: it only reads its constants and calls the thread-safe TraceSink.
#pragma once

#include <optional>
#include <vector>

#include "core/executor.h"
#include "core/tensor_entry.h"
#include "core/trace_sink.h"

namespace kolo {

class OpTracer {
 public:
  // `sink` may be null (nothing is traced); it must outlive the tracer.
  OpTracer(TraceSink* sink, int rank) : sink_(sink), rank_(rank) {}

  // Marks `entry` traced (before it is queued) and returns the event that opens its op span,
  // for the caller to Record once the enqueue succeeded; nullopt when tracing is off. Entries
  // queued while tracing was off stay untraced to the end, so every span is closed.
  std::optional<TraceEvent> Begin(TensorEntry& entry) const;
  void Record(TraceEvent event) const;

  // QUEUE for each traced entry: enqueue until the background thread took up its response.
  void Taken(const std::vector<TensorEntry*>& entries, Clock::TimePoint now) const;

  // Closes the span after the callback ran from `callback_start` to `callback_end`. `response`
  // is the decision the entry completed with (null when it failed outside one, e.g. an abort).
  void Completed(const TensorEntry& entry, const Status& status, const Response* response,
                 Clock::TimePoint callback_start, Clock::TimePoint callback_end) const;

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

  bool enabled() const { return sink_ != nullptr && sink_->enabled(); }

 private:
  void RecordComplete(const TensorEntry& entry, const char* name, Clock::TimePoint start,
                      Clock::TimePoint end, std::string args_json) const;

  TraceSink* const sink_;
  const int rank_;
};

// "ALLREDUCE" for OpType::kAllreduce, and so on.
std::string OpSpanName(OpType op);

}  // namespace kolo
