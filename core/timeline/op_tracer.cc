#include "core/timeline/op_tracer.h"

#include <cctype>

namespace kolo {

std::string OpSpanName(OpType op) {
  std::string name = OpTypeName(op);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

void OpTracer::Begin(TensorEntry& entry) {
  if (hub_ == nullptr || !hub_->enabled()) return;
  {
    MutexLock lock(&mu_);
    std::vector<bool>& used = slots_[entry.meta.name];
    size_t slot = 0;
    while (slot < used.size() && used[slot]) ++slot;
    if (slot == used.size()) used.push_back(false);
    used[slot] = true;
    entry.trace_slot = static_cast<int>(slot);
  }
  entry.trace_track = entry.trace_slot == 0
                          ? entry.meta.name
                          : entry.meta.name + " #" + std::to_string(entry.trace_slot + 1);
  entry.trace_generation = hub_->generation();
  TraceEvent event;
  event.phase = 'B';
  event.pid = rank_;
  event.track = entry.trace_track;
  event.name = OpSpanName(entry.meta.op);
  event.start = entry.enqueued_at;
  event.args_json = "{\"tensor\":\"" + JsonEscape(entry.meta.name) + "\",\"dtype\":\"" +
                    DataTypeName(entry.meta.dtype) + "\",\"shape\":\"" +
                    ShapeToString(entry.meta.shape) +
                    "\",\"bytes\":" + std::to_string(entry.input.num_bytes()) + "}";
  hub_->Record(std::move(event));
}

void OpTracer::Abandon(TensorEntry& entry, const Status& why) {
  if (!Opened(entry)) return;
  if (Traced(entry)) {
    RecordEnd(entry, entry.enqueued_at, "{\"status\":\"" + JsonEscape(why.ToString()) + "\"}");
  }
  ReleaseSlot(entry);
}

bool OpTracer::AnyOpened(const std::vector<TensorEntry*>& entries) {
  for (const TensorEntry* entry : entries) {
    if (Opened(*entry)) return true;
  }
  return false;
}

void OpTracer::Taken(const std::vector<TensorEntry*>& entries, Clock::TimePoint now) const {
  for (const TensorEntry* entry : entries) {
    if (Traced(*entry)) RecordComplete(*entry, "QUEUE", entry->enqueued_at, now);
  }
}

void OpTracer::Completed(const TensorEntry& entry, const Status& status, const Response* response,
                         Clock::TimePoint callback_start, Clock::TimePoint callback_end) {
  if (!Opened(entry)) return;
  if (Traced(entry)) {
    RecordComplete(entry, "CALLBACK", callback_start, callback_end);
    std::string args = "{";
    if (response != nullptr) {
      const uint64_t group = response->fast_group != 0 ? response->fast_group : response->seq;
      args += "\"seq\":" + std::to_string(response->seq) +
              ",\"fused_group\":" + std::to_string(group) +
              ",\"group_size\":" + std::to_string(response->names.size()) + ",";
      if (response->fast_round != 0) {
        args += "\"fast_path_round\":" + std::to_string(response->fast_round) + ",";
      }
    }
    args += "\"status\":\"" + JsonEscape(status.ok() ? "OK" : status.ToString()) + "\"}";
    RecordEnd(entry, callback_end, std::move(args));
  }
  ReleaseSlot(entry);
}

void OpTracer::Phases::OnPhase(const char* name, Clock::TimePoint start, Clock::TimePoint end) {
  for (const TensorEntry* entry : entries_) {
    if (tracer_.Traced(*entry)) tracer_.RecordComplete(*entry, name, start, end);
  }
}

bool OpTracer::Traced(const TensorEntry& entry) const {
  return Opened(entry) && hub_ != nullptr && hub_->enabled() &&
         hub_->generation() == entry.trace_generation;
}

void OpTracer::RecordComplete(const TensorEntry& entry, const char* name, Clock::TimePoint start,
                              Clock::TimePoint end) const {
  TraceEvent event;
  event.phase = 'X';
  event.pid = rank_;
  event.track = entry.trace_track;
  event.name = name;
  event.start = start;
  event.end = end;
  hub_->Record(std::move(event));
}

void OpTracer::RecordEnd(const TensorEntry& entry, Clock::TimePoint at,
                         std::string args_json) const {
  TraceEvent event;
  event.phase = 'E';
  event.pid = rank_;
  event.track = entry.trace_track;
  event.name = OpSpanName(entry.meta.op);
  event.start = at;
  event.args_json = std::move(args_json);
  hub_->Record(std::move(event));
}

void OpTracer::ReleaseSlot(const TensorEntry& entry) {
  MutexLock lock(&mu_);
  auto it = slots_.find(entry.meta.name);
  if (it == slots_.end() || entry.trace_slot >= static_cast<int>(it->second.size())) return;
  it->second[entry.trace_slot] = false;
  if (entry.trace_slot == 0 && it->second.size() == 1) slots_.erase(it);
}

}  // namespace kolo
