#include "controller/negotiator.h"

#include "controller/fusion_planner.h"
#include "controller/meta_validation.h"

namespace kolo::controller {

Negotiator::Negotiator(const Config& config)
    : config_(config), table_(config.size), cache_(config.cache_capacity) {}

Status Negotiator::AddRequests(int rank, const std::vector<Request>& requests, Clock::TimePoint now,
                               std::vector<NegotiationEvent>* events) {
  for (const Request& request : requests) {
    const TensorMeta* meta = &request.meta;
    if (request.cache_id != 0) {
      meta = cache_.Lookup(request.cache_id);
      if (meta == nullptr) {
        return Internal("rank " + std::to_string(rank) + " sent unknown cache id " +
                        std::to_string(request.cache_id));
      }
    } else {
      KOLO_RETURN_IF_ERROR(CheckWellFormed(rank, *meta));
    }
    const size_t before = ready_.size();
    KOLO_RETURN_IF_ERROR(table_.Announce(rank, *meta, now, &ready_, events));
    CommitToCache(before);
  }
  return Status::Ok();
}

void Negotiator::AddShutdown(int rank, std::vector<NegotiationEvent>* events) {
  table_.MarkShutdown(rank, &ready_, events);
}

void Negotiator::AddGone(int rank, std::vector<NegotiationEvent>* events) {
  table_.MarkGone(rank, &ready_, events);
}

void Negotiator::CommitToCache(size_t first) {
  // Ids are committed when a name completes, not when it is planned, so that readiness order
  // alone decides them; no rank can use an id before the response that carries it arrives.
  for (size_t i = first; i < ready_.size(); ++i) {
    // Allgather and alltoall metadata differs per rank (dimension 0, splits), so no one id
    // can stand for it.
    if (!ready_[i].is_error() && ready_[i].meta.op != OpType::kAllgather &&
        ready_[i].meta.op != OpType::kAlltoall) {
      ready_[i].cache_id = cache_.Commit(ready_[i].meta);
    }
  }
}

std::vector<Response> Negotiator::Plan() {
  std::vector<Response> responses =
      PlanResponses(ready_, config_.fusion_threshold_bytes, &next_seq_);
  ready_.clear();
  return responses;
}

}  // namespace kolo::controller
