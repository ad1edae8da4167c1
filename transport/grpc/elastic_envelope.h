// The seal on every elastic rendezvous message (elastic_rendezvous.h, docs/SECURITY.md): an
// HMAC-SHA256 with the job secret over a label that names the call and its direction, the job
// id, the caller's fresh nonce and the body. A seal made for one call or direction is never
// valid for another, and an answer is bound to its call by the call's nonce. Internal to
// transport/grpc/. Pure functions and a small thread-safe replay filter.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <unordered_set>

#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "kolo/status.h"
#include "transport/auth/hmac_auth.h"

namespace kolo::transport {

enum class ElasticCall { kJoin, kPoll };
enum class ElasticDirection { kCall, kAnswer };

struct SealedMessage {
  std::string body;
  std::string nonce;
  std::string proof;
};

// Seals `body` with `nonce` (a call's fresh one, or the call's for its answer).
SealedMessage Seal(const JobCredentials& credentials, ElasticCall call, ElasticDirection direction,
                   std::string body, std::string nonce);

// Checks `message`'s nonce size and proof. The error names what failed, never the secret.
Status CheckSeal(const JobCredentials& credentials, ElasticCall call, ElasticDirection direction,
                 const SealedMessage& message);

// Remembers the last `capacity` call nonces the driver accepted, so that a recorded call
// replayed to it is refused. Thread-safe.
class NonceFilter {
 public:
  explicit NonceFilter(size_t capacity) : capacity_(capacity) {}
  // True the first time `nonce` is seen (within the last `capacity`).
  bool Fresh(const std::string& nonce);

 private:
  const size_t capacity_;
  Mutex mu_;
  std::deque<std::string> order_ KOLO_GUARDED_BY(mu_);
  std::unordered_set<std::string> seen_ KOLO_GUARDED_BY(mu_);
};

}  // namespace kolo::transport
