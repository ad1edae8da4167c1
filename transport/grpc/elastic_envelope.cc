#include "transport/grpc/elastic_envelope.h"

namespace kolo::transport {
namespace {

std::string_view Label(ElasticCall call, ElasticDirection direction) {
  if (call == ElasticCall::kJoin) {
    return direction == ElasticDirection::kCall ? "kolo-elastic-join-call"
                                                : "kolo-elastic-join-answer";
  }
  return direction == ElasticDirection::kCall ? "kolo-elastic-poll-call"
                                              : "kolo-elastic-poll-answer";
}

}  // namespace

SealedMessage Seal(const JobCredentials& credentials, ElasticCall call, ElasticDirection direction,
                   std::string body, std::string nonce) {
  SealedMessage sealed;
  sealed.proof = Mac(credentials.key, Label(call, direction), {credentials.job_id, nonce, body});
  sealed.body = std::move(body);
  sealed.nonce = std::move(nonce);
  return sealed;
}

Status CheckSeal(const JobCredentials& credentials, ElasticCall call, ElasticDirection direction,
                 const SealedMessage& message) {
  const char* what = direction == ElasticDirection::kCall ? "call" : "answer";
  if (message.nonce.size() != kNonceBytes) {
    return FailedPrecondition(std::string("elastic rendezvous ") + what + " without a " +
                              std::to_string(kNonceBytes) + "-byte nonce");
  }
  const std::string expected = Mac(credentials.key, Label(call, direction),
                                   {credentials.job_id, message.nonce, message.body});
  if (!MacEquals(expected, message.proof)) {
    return FailedPrecondition(std::string("elastic rendezvous ") + what +
                              " does not prove the job secret (another job's, or not kolo's)");
  }
  return Status::Ok();
}

bool NonceFilter::Fresh(const std::string& nonce) {
  MutexLock lock(&mu_);
  if (!seen_.insert(nonce).second) return false;
  order_.push_back(nonce);
  if (order_.size() > capacity_) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

}  // namespace kolo::transport
