#include "core/op_tracer.h"

#include <cctype>

namespace kolo {

std::string OpSpanName(OpType op) {
  std::string name = OpTypeName(op);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::optional<TraceEvent> OpTracer::Begin(TensorEntry& entry) const {
  if (!enabled()) return std::nullopt;
  entry.traced = true;
  TraceEvent event;
  event.phase = 'B';
  event.pid = rank_;
  event.track = entry.meta.name;
  event.name = OpSpanName(entry.meta.op);
  event.start = entry.enqueued_at;
  event.args_json = "{\"dtype\":\"" + DataTypeName(entry.meta.dtype) + "\",\"shape\":\"" +
                    ShapeToString(entry.meta.shape) +
                    "\",\"bytes\":" + std::to_string(entry.input.num_bytes()) + "}";
  return event;
}

void OpTracer::Record(TraceEvent event) const {
  if (sink_ != nullptr) sink_->Record(std::move(event));
}

void OpTracer::Taken(const std::vector<TensorEntry*>& entries, Clock::TimePoint now) const {
  for (const TensorEntry* entry : entries) {
    if (entry->traced) RecordComplete(*entry, "QUEUE", entry->enqueued_at, now, "");
  }
}

void OpTracer::Completed(const TensorEntry& entry, const Status& status, const Response* response,
                         Clock::TimePoint callback_start, Clock::TimePoint callback_end) const {
  if (!entry.traced || sink_ == nullptr) return;
  RecordComplete(entry, "CALLBACK", callback_start, callback_end, "");
  TraceEvent event;
  event.phase = 'E';
  event.pid = rank_;
  event.track = entry.meta.name;
  event.name = OpSpanName(entry.meta.op);
  event.start = callback_end;
  std::string args = "{";
  if (response != nullptr) {
    args += "\"seq\":" + std::to_string(response->seq) +
            ",\"fused_group\":" + std::to_string(response->seq) +
            ",\"group_size\":" + std::to_string(response->names.size()) + ",";
  }
  args += "\"status\":\"" + JsonEscape(status.ok() ? "OK" : status.ToString()) + "\"}";
  event.args_json = std::move(args);
  sink_->Record(std::move(event));
}

void OpTracer::Phases::OnPhase(const char* name, Clock::TimePoint start, Clock::TimePoint end) {
  for (const TensorEntry* entry : entries_) {
    if (entry->traced) tracer_.RecordComplete(*entry, name, start, end, "");
  }
}

void OpTracer::RecordComplete(const TensorEntry& entry, const char* name, Clock::TimePoint start,
                              Clock::TimePoint end, std::string args_json) const {
  if (sink_ == nullptr) return;
  TraceEvent event;
  event.phase = 'X';
  event.pid = rank_;
  event.track = entry.meta.name;
  event.name = name;
  event.start = start;
  event.end = end;
  event.args_json = std::move(args_json);
  sink_->Record(std::move(event));
}

}  // namespace kolo
