#include "controller/fusion_planner.h"

namespace kolo::controller {
namespace {

bool Fusible(const ReadyTensor& t) {
  return !t.is_error() && t.meta.op == OpType::kAllreduce;
}

// Whether `b` may share a response with `a` (both fusible).
bool SameFusionKey(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.device == b.device && a.reduce_op == b.reduce_op &&
         a.prescale == b.prescale && a.postscale == b.postscale;
}

Response StartResponse(const ReadyTensor& t, uint64_t seq) {
  Response r;
  r.seq = seq;
  r.op = t.meta.op;
  r.dtype = t.meta.dtype;
  r.reduce_op = t.meta.reduce_op;
  r.prescale = t.meta.prescale;
  r.postscale = t.meta.postscale;
  r.root = t.meta.root;
  r.error = t.error;
  r.error_code = t.error_code;
  r.first_dims = t.first_dims;
  r.splits = t.splits;
  return r;
}

void AddTensor(const ReadyTensor& t, Response* r) {
  r->names.push_back(t.meta.name);
  r->cache_ids.push_back(t.is_error() ? 0 : t.cache_id);
  r->num_elements.push_back(t.is_error() ? 0 : t.meta.num_elements());
}

}  // namespace

int64_t TensorBytes(const TensorMeta& meta) {
  return meta.num_elements() * static_cast<int64_t>(DataTypeSize(meta.dtype));
}

std::vector<Response> PlanResponses(const std::vector<ReadyTensor>& ready,
                                    int64_t fusion_threshold_bytes, uint64_t* next_seq) {
  std::vector<Response> responses;
  size_t i = 0;
  while (i < ready.size()) {
    const ReadyTensor& head = ready[i];
    Response response = StartResponse(head, (*next_seq)++);
    AddTensor(head, &response);
    ++i;
    if (Fusible(head) && !head.meta.group.empty()) {
      // A grouped allreduce is one response whatever its size. Every rank submits a group's
      // tensors in one batch, so they become ready together, one after another.
      while (i < ready.size() && Fusible(ready[i]) && ready[i].meta.group == head.meta.group) {
        AddTensor(ready[i], &response);
        ++i;
      }
    } else if (Fusible(head)) {
      int64_t bytes = TensorBytes(head.meta);
      while (i < ready.size() && Fusible(ready[i]) && ready[i].meta.group.empty() &&
             SameFusionKey(head.meta, ready[i].meta) &&
             bytes + TensorBytes(ready[i].meta) <= fusion_threshold_bytes) {
        bytes += TensorBytes(ready[i].meta);
        AddTensor(ready[i], &response);
        ++i;
      }
    }
    responses.push_back(std::move(response));
  }
  return responses;
}

}  // namespace kolo::controller
