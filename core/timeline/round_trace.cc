#include "core/timeline/round_trace.h"

#include <algorithm>
#include <utility>

namespace kolo {
void RoundTrace::Ready(int rank, uint32_t id, const std::string& name, OpType op, uint64_t round,
                       Clock::TimePoint now) {
  if (!on() || rank < 0 || rank >= size_) return;
  if (round > decided_ + 1) {
    held_.push_back(Held{rank, id, name, op, round});
    return;
  }
  auto [it, fresh] = open_.try_emplace(id);
  Open& span = it->second;
  if (fresh) {
    span.seen.assign(size_, false);
    span.span = NegotiateSpanName(op);
    sink_->Record(ControllerTraceEvent('B', name, span.span, now));
  }
  if (span.seen[rank]) return;  // peers repeat what is still waiting in every round
  span.seen[rank] = true;
  span.last_rank = rank;
  sink_->Record(ControllerTraceEvent('i', name, std::to_string(rank), now));
}

void RoundTrace::Closed(uint32_t id, const std::string& name, bool ran, Clock::TimePoint now) {
  auto it = open_.find(id);
  if (it == open_.end()) return;
  const int last = ran ? it->second.last_rank : -1;
  std::string span = std::move(it->second.span);
  open_.erase(it);
  if (!on()) return;
  TraceEvent end = ControllerTraceEvent('E', name, std::move(span), now);
  end.args_json = "{\"last_rank\":" + std::to_string(last) + "}";
  sink_->Record(std::move(end));
}

void RoundTrace::Decided(uint64_t round, Clock::TimePoint now) {
  decided_ = std::max(decided_, round);
  if (held_.empty()) return;
  std::vector<Held> held;
  held.swap(held_);
  for (Held& h : held) Ready(h.rank, h.id, h.name, h.op, h.round, now);  // later ones stay held
}

}  // namespace kolo
