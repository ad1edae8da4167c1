#include "core/loop/work_order.h"

#include <algorithm>
#include <string>
#include <tuple>
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

// A lone op that every rank staged alike (RoundDecision::staged): the exchange the executor
// runs it as without its copy in and a sync, where the plane's next exchange is that one.
std::optional<uint64_t> StagedExchange(const RoundDecision& decision, const Response& response) {
  if (response.cache_ids.size() != 1 || !decision.staged.has_value() ||
      decision.staged.id != response.cache_ids[0] || !response.eager_inputs.empty()) {
    return std::nullopt;
  }
  return decision.staged.exchange;
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
    spare_ = std::move(front);  // its buffers, for TakeSpare
    decided_.pop_front();
  }
  return false;
}

WorkOrder::Decided WorkOrder::TakeSpare() {
  Decided decided = std::move(spare_);
  spare_ = Decided();
  decided.decision = RoundDecision();
  decided.ids.clear();
  decided.entries.clear();
  decided.next = 0;
  decided.batches = 0;
  return decided;
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

namespace {

// Where a decided op runs among its decision's (Arrange): barriers first, then by set, a group
// at its smallest id with its members by fusion key (in the order the keys first appear among
// them) and place, the rest by id.
struct Place {
  bool not_barrier;
  int process_set;
  uint32_t anchor;
  int key_rank;
  int index;
  uint32_t id;
  size_t at;
  bool operator<(const Place& o) const {
    return std::tie(not_barrier, process_set, anchor, key_rank, index, id) <
           std::tie(o.not_barrier, o.process_set, o.anchor, o.key_rank, o.index, o.id);
  }
};

bool SameGroup(const FastSpec& a, const FastSpec& b) {
  return a.group != 0 && a.group == b.group && a.process_set == b.process_set;
}

// Gives the members of the group at places[first] their anchor and key ranks.
void PlaceGroup(const std::vector<FastSpec>& specs, size_t first, std::vector<Place>* places) {
  std::vector<size_t> members;  // indices into places, by place in the group
  for (size_t j = first; j < places->size(); ++j) {
    if (SameGroup(specs[first], specs[j])) members.push_back(j);
  }
  std::sort(members.begin(), members.end(), [&](size_t a, size_t b) {
    return std::tie(specs[a].group_index, (*places)[a].id) <
           std::tie(specs[b].group_index, (*places)[b].id);
  });
  std::vector<FusionKey> keys;
  uint32_t anchor = UINT32_MAX;
  for (size_t j : members) anchor = std::min(anchor, (*places)[j].id);
  for (size_t j : members) {
    const FusionKey key = FusionKey::Of(specs[j], Device::Cpu());
    size_t rank = 0;
    while (rank < keys.size() && !SameFusionKey(keys[rank], key)) ++rank;
    if (rank == keys.size()) keys.push_back(key);
    (*places)[j].anchor = anchor;
    (*places)[j].key_rank = static_cast<int>(rank);
    (*places)[j].index = specs[j].group_index;
  }
}

}  // namespace

void WorkOrder::OrderBySet(Decided* decided) {
  const std::vector<FastSpec>& specs = decided->specs;
  bool plain = true;  // the common case (the job's ungrouped ops alone): nothing to move
  for (size_t i = 0; i < specs.size() && plain; ++i) {
    plain = specs[i].group == 0 && specs[i].op != OpType::kBarrier &&
            (i == 0 || specs[i - 1].process_set <= specs[i].process_set);
  }
  if (plain) return;
  std::vector<Place> places(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint32_t id = decided->ids[i];
    places[i] = Place{specs[i].op != OpType::kBarrier, specs[i].process_set, id, 0, 0, id, i};
  }
  std::vector<bool> placed(specs.size(), false);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].group == 0 || placed[i]) continue;
    PlaceGroup(specs, i, &places);
    for (size_t j = i; j < specs.size(); ++j)
      placed[j] = placed[j] || SameGroup(specs[i], specs[j]);
  }
  std::sort(places.begin(), places.end());
  Decided sorted{decided->decision, {}, {}, {}, 0, 0};
  for (const Place& place : places) {
    sorted.ids.push_back(decided->ids[place.at]);
    sorted.entries.push_back(decided->entries[place.at]);
    sorted.specs.push_back(std::move(decided->specs[place.at]));
  }
  decided->ids = std::move(sorted.ids);
  decided->entries = std::move(sorted.entries);
  decided->specs = std::move(sorted.specs);
}

// The front decision's next batch of cached ops, by set and in ascending id order, fused under
// the same rule as the controller's (core/fusion/fusion_rule.h) and the round's smallest
// threshold.
namespace {

// Whether `s` (of fusion key `key`) joins the batch that began with `head`, as the controller's
// planner decides: a group's members of one key make one response whatever its size, and
// nothing else joins it; other ops fuse under the threshold.
bool JoinsBatch(const FusionBatch& batch, const FusionKey& batch_key, const FastSpec& head,
                const FastSpec& s, const FusionKey& key) {
  const bool grouped = head.group != 0;
  if (batch.empty()) return true;
  if (grouped != (s.group != 0)) return false;
  if (grouped) return SameGroup(head, s) && SameFusionKey(batch_key, key);
  return batch.Admits(key, s.fusion_bytes);
}

}  // namespace

void WorkOrder::Cut(Work* work) {
  Decided& decided = decided_.front();
  const RoundDecision& decision = decided.decision;
  const uint64_t threshold = std::min<uint64_t>(decision.fusion_threshold, INT64_MAX);
  FusionBatch batch(static_cast<int64_t>(threshold));
  FusionKey batch_key;
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
  const FastSpec& head = decided.specs[decided.next];
  for (; decided.next < decided.ids.size(); ++decided.next) {
    const FastSpec& s = decided.specs[decided.next];
    const FusionKey key = FusionKey::Of(s, Device::Cpu());  // the fast path's ops are on CPU
    if (!JoinsBatch(batch, batch_key, head, s, key)) break;
    if (batch.empty()) batch_key = key;
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
  response.staged = StagedExchange(decision, response);
  response.fast_group = FastGroup(decision.round, decided.batches++);
}

}  // namespace kolo
