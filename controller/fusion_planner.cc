#include "controller/fusion_planner.h"

#include "core/fusion/fusion_rule.h"

namespace kolo::controller {
namespace {

// A tensor that may share a response (an error response always stands alone).
bool Fusible(const ReadyTensor& t) {
  return !t.is_error() && IsFusibleOp(t.meta.op);
}

Response StartResponse(const ReadyTensor& t, uint64_t seq) {
  Response r;
  r.signature() = t.meta.signature();
  r.seq = seq;
  r.gpu = !t.meta.device.is_cpu();
  r.error = t.error;
  r.error_code = t.error_code;
  r.splits = t.splits;
  return r;
}

void AddTensor(const ReadyTensor& t, Response* r) {
  r->names.push_back(t.meta.name);
  r->cache_ids.push_back(t.is_error() ? 0 : t.cache_id);
  r->num_elements.push_back(t.is_error() ? 0 : t.meta.num_elements());
  // Allgather: one row of `size` first dimensions per tensor, in the order of `names`.
  r->first_dims.insert(r->first_dims.end(), t.first_dims.begin(), t.first_dims.end());
}

// Plans the grouped op whose first member is ready[first]: its members are the tensors from
// there on that carry its key (every rank submits a group in one batch, so they become ready
// together, one after another). One response per fusion key (a mixed-dtype group has one per
// dtype) whatever the threshold, in the order the keys first appear, members in their order.
// Returns the index past the group.
size_t PlanGroup(const std::vector<ReadyTensor>& ready, size_t first, uint64_t* next_seq,
                 std::vector<Response>* responses) {
  const std::string& group = ready[first].meta.group;
  size_t end = first;
  while (end < ready.size() && Fusible(ready[end]) && ready[end].meta.group == group) ++end;
  std::vector<bool> planned(end - first, false);
  for (size_t i = first; i < end; ++i) {
    if (planned[i - first]) continue;
    const FusionKey key = FusionKey::Of(ready[i].meta);
    Response response = StartResponse(ready[i], (*next_seq)++);
    for (size_t j = i; j < end; ++j) {
      if (planned[j - first] || !SameFusionKey(key, FusionKey::Of(ready[j].meta))) continue;
      AddTensor(ready[j], &response);
      planned[j - first] = true;
    }
    responses->push_back(std::move(response));
  }
  return end;
}

}  // namespace

std::vector<Response> PlanResponses(const std::vector<ReadyTensor>& ready,
                                    int64_t fusion_threshold_bytes, uint64_t* next_seq) {
  std::vector<Response> responses;
  size_t i = 0;
  while (i < ready.size()) {
    const ReadyTensor& head = ready[i];
    if (Fusible(head) && !head.meta.group.empty()) {
      i = PlanGroup(ready, i, next_seq, &responses);
      continue;
    }
    Response response = StartResponse(head, (*next_seq)++);
    AddTensor(head, &response);
    ++i;
    if (Fusible(head)) {
      FusionBatch batch(fusion_threshold_bytes);
      batch.Add(FusionKey::Of(head.meta), FusionBytes(head.meta, head.first_dims));
      while (i < ready.size() && Fusible(ready[i]) && ready[i].meta.group.empty()) {
        const FusionKey key = FusionKey::Of(ready[i].meta);
        const int64_t bytes = FusionBytes(ready[i].meta, ready[i].first_dims);
        if (!batch.Admits(key, bytes)) break;
        batch.Add(key, bytes);
        AddTensor(ready[i], &response);
        ++i;
      }
    }
    responses.push_back(std::move(response));
  }
  return responses;
}

}  // namespace kolo::controller
