#include "core/loop/work_order.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/fusion/fusion_rule.h"
#include "core/op_text.h"

namespace kolo {
namespace {

// A round runs at most KOLO_CACHE_CAPACITY <= 10^6 < 2^20 tensors, so its batches fit below
// bit 20; the groups stay apart from controller sequence numbers and below 2^53, so JSON
// readers (whose numbers are doubles) read them exactly for the first 2^32 rounds.
uint64_t FastGroup(uint64_t round, uint64_t batch) {
  return (uint64_t{1} << 52) + (round << 20) + batch;
}

// What a batch's first op, `s`, says for the whole response.
void StartBatch(const FastSpec& s, Response* response, std::vector<int64_t>* splits) {
  response->signature() = s.signature();
  splits->assign(s.splits.begin(), s.splits.end());  // an alltoall's (never fused); else empty
  // The round's hierarchical rule is an allreduce's; the others apply the configured
  // KOLO_HIERARCHICAL, as they do when the controller decides them.
  if (s.op != OpType::kAllreduce) response->hierarchy_min_bytes.reset();
}

// Points `inputs` at every rank's input of ids[first, end) (EagerInputs: t * n + r) if every
// rank's round message carried each, the batch being the job's allreduce; else clears it. The
// same on every rank: every rank holds every rank's message of the round (all-to-all).
void EagerInputs(const WorkOrder::Decided& decided, size_t first, size_t end,
                 const Response& response, std::vector<const void*>* inputs) {
  inputs->clear();
  const std::vector<RoundEager>& by_rank = decided.decision.eager;
  if (by_rank.empty() || response.op != OpType::kAllreduce || response.process_set != 0) return;
  const size_t element = DataTypeSize(response.dtype);
  for (size_t i = first; i < end; ++i) {
    const size_t want = static_cast<size_t>(decided.specs[i].num_elements) * element;
    for (const RoundEager& eager : by_rank) {
      const RoundEager::Input* input = eager.Find(decided.ids[i]);
      if (input == nullptr || input->bytes != want) {
        inputs->clear();
        return;
      }
      inputs->push_back(input->data);
    }
  }
}

}  // namespace

Status WorkOrder::Receive(Response response) {
  if (response.seq != received_seq_ + 1) {
    return Internal("protocol error: response " + std::to_string(response.seq) + " arrived after " +
                    std::to_string(received_seq_));
  }
  received_seq_ = response.seq;
  received_.push_back(std::move(response));
  return Status::Ok();
}

void WorkOrder::Add(Decided decided) {
  OrderBySet(&decided);
  decided_.push_back(std::move(decided));
}

bool WorkOrder::Next(TimePoint now, Work* work) {
  while (!decided_.empty()) {
    Decided& front = decided_.front();
    if (handed_seq_ < front.decision.run_through_seq) {
      if (received_.empty()) {
        if (!blocked_) blocked_since_ = now;
        blocked_ = true;
        return false;
      }
      work->from_controller = true;
      work->response = std::move(received_.front());
      work->entries.clear();
      received_.pop_front();
      handed_seq_ = work->response.seq;
      return true;
    }
    blocked_ = false;
    if (front.next < front.ids.size()) {
      Cut(work);
      return true;
    }
    decided_.pop_front();
  }
  return false;
}

Status WorkOrder::CheckBlocked(TimePoint now, double timeout_seconds) const {
  if (blocked_ && now - blocked_since_ >= DurationOf(timeout_seconds)) {
    return DeadlineExceeded("waited " + SecondsText(timeout_seconds) +
                            " (KOLO_TIMEOUT_SECONDS) for controller response " +
                            std::to_string(handed_seq_ + 1) + ", which another rank has received");
  }
  return Status::Ok();
}

void WorkOrder::Drop() {
  decided_.clear();
  received_.clear();
  handed_seq_ = received_seq_;
}

void WorkOrder::OrderBySet(Decided* decided) {
  const std::vector<FastSpec>& specs = decided->specs;
  if (std::is_sorted(specs.begin(), specs.end(), [](const FastSpec& a, const FastSpec& b) {
        return a.process_set < b.process_set;
      })) {
    return;  // the common case (the job's set alone): nothing to move
  }
  std::vector<size_t> order(specs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return specs[a].process_set < specs[b].process_set; });
  Decided sorted{decided->decision, {}, {}, {}, 0, 0};
  for (size_t i : order) {
    sorted.ids.push_back(decided->ids[i]);
    sorted.entries.push_back(decided->entries[i]);
    sorted.specs.push_back(std::move(decided->specs[i]));
  }
  decided->ids = std::move(sorted.ids);
  decided->entries = std::move(sorted.entries);
  decided->specs = std::move(sorted.specs);
}

// The front decision's next batch of cached ops, by set and in ascending id order, fused under
// the same rule as the controller's (core/fusion/fusion_rule.h) and the round's smallest
// threshold.
void WorkOrder::Cut(Work* work) {
  Decided& decided = decided_.front();
  const RoundDecision& decision = decided.decision;
  const uint64_t threshold = std::min<uint64_t>(decision.fusion_threshold, INT64_MAX);
  FusionBatch batch(static_cast<int64_t>(threshold));
  // A fresh response around the previous work's buffers: its name strings are assigned over
  // (no allocation while they fit), its vectors keep their capacity.
  std::vector<std::string> names = std::move(work->response.names);
  std::vector<uint32_t> cache_ids = std::move(work->response.cache_ids);
  std::vector<int64_t> num_elements = std::move(work->response.num_elements);
  std::vector<int64_t> first_dims = std::move(work->response.first_dims);
  std::vector<int64_t> splits = std::move(work->response.splits);
  std::vector<const void*> eager_inputs = std::move(work->response.eager_inputs);
  cache_ids.clear();
  num_elements.clear();
  first_dims.clear();
  splits.clear();
  work->entries.clear();
  work->from_controller = false;
  work->response = Response();
  Response& response = work->response;
  size_t count = 0;
  const size_t first = decided.next;
  response.seq = 0;  // the fast path: no controller sequence number
  response.fast_round = decision.round;
  response.hierarchy_min_bytes = decision.hierarchy_min_bytes;
  for (; decided.next < decided.ids.size(); ++decided.next) {
    const FastSpec& s = decided.specs[decided.next];
    const FusionKey key = FusionKey::Of(s, Device::Cpu());  // the fast path's ops are on CPU
    if (!batch.Admits(key, s.fusion_bytes)) break;
    if (batch.empty()) StartBatch(s, &response, &splits);
    batch.Add(key, s.fusion_bytes);
    if (count < names.size()) {
      names[count] = s.name;
    } else {
      names.push_back(s.name);
    }
    ++count;
    cache_ids.push_back(decided.ids[decided.next]);
    num_elements.push_back(s.num_elements);
    first_dims.insert(first_dims.end(), s.first_dims.begin(), s.first_dims.end());
    work->entries.push_back(decided.entries[decided.next]);
  }
  names.resize(count);
  response.names = std::move(names);
  response.cache_ids = std::move(cache_ids);
  response.num_elements = std::move(num_elements);
  response.first_dims = std::move(first_dims);
  response.splits = std::move(splits);
  EagerInputs(decided, first, decided.next, response, &eager_inputs);
  response.eager_inputs = std::move(eager_inputs);
  response.fast_group = FastGroup(decision.round, decided.batches++);
}

}  // namespace kolo
