// The elastic rendezvous (docs/ELASTIC.md): how a worker process of an elastic job and kolorun's
// elastic driver talk. The driver holds the job's membership and serves two unary gRPC calls:
//   Join: a worker asks for its place in the next generation (rank, size, the controller's
//         address, the generation's job id); the driver answers within kJoinAnswerWait, with
//         PENDING while the generation is not formed, and the worker asks again.
//   Poll: what changed in the job's hosts after a timestamp (Horovod's host update messages).
// Every call and answer is sealed with the job secret (elastic_envelope.h): the driver serves
// only the job's workers, and a worker believes only its driver. The driver's side of the
// logic is an ElasticMembershipService (launcher/elastic_membership.h implements it).
//
// Threading: the server runs the service's methods on gRPC's threads, several at once; the
// client's calls block the calling thread until their deadline at most and may be made from
// any thread (one channel, shared).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kolo/status.h"
#include "transport/auth/hmac_auth.h"

namespace kolo::transport {

// The longest a Join call waits in the driver for its generation before it answers PENDING.
constexpr std::chrono::milliseconds kJoinAnswerWait{1000};

struct ElasticJoinRequest {
  std::string worker_id;        // KOLO_ELASTIC_WORKER_ID
  int64_t last_generation = 0;  // the last generation the worker belonged to; 0: none
  int controller_port = 0;      // free on the worker's host: the controller's, if it is rank 0
};

enum class ElasticOutcome { kPending, kAssigned, kRefused };

struct ElasticAssignment {
  ElasticOutcome outcome = ElasticOutcome::kPending;
  std::string message;  // kRefused: why
  int64_t generation = 0;
  int rank = 0;
  int size = 0;
  std::string controller_address;  // "host:port"
  std::string job_id;              // the generation's job id
  std::string hostname;            // KOLO_HOSTNAME for the worker
  // The driver's host clock when the generation formed: host changes up to it are in the
  // generation already, so Poll reports only later ones to its members.
  int64_t hosts_timestamp = 0;
};

struct ElasticHostChanges {
  int64_t timestamp = 0;
  int kinds = 0;  // kolo::elastic::HostUpdateBits
  // A worker of the caller's generation that has exited or is being stopped (or "a newer
  // generation formed"); empty while the generation is whole. Rank 0 aborts a start with it.
  std::string lost_member;
  int lost_rank = -1;  // the lost member's rank; -1 when none (or a newer generation formed)
};

// The driver's membership, as the server needs it. Called on gRPC threads, concurrently.
class ElasticMembershipService {
 public:
  virtual ~ElasticMembershipService() = default;
  // Registers the worker's wish to join the generation after `request.last_generation` and
  // waits until `deadline` for it; kPending at the deadline.
  virtual ElasticAssignment Join(const ElasticJoinRequest& request,
                                 std::chrono::steady_clock::time_point deadline) = 0;
  // Host changes after `since`, and whether `generation` lost a member.
  virtual ElasticHostChanges Poll(const std::string& worker_id, int64_t since,
                                  int64_t generation) = 0;
};

class ElasticRendezvousServer {
 public:
  // Listens on `listen_address` ("host:port"; port 0 picks one) and serves `service`, which must
  // outlive the server. Calls whose seal does not prove `credentials` are refused
  // (PERMISSION_DENIED) and never reach the service.
  static StatusOr<std::unique_ptr<ElasticRendezvousServer>> Start(
      const std::string& listen_address, const JobCredentials& credentials,
      ElasticMembershipService* service);
  ~ElasticRendezvousServer();  // Stop()

  int port() const;
  // Stops serving: calls in progress end (a waiting Join within kJoinAnswerWait); joins gRPC's
  // threads. Idempotent.
  void Stop();

 private:
  class Impl;
  explicit ElasticRendezvousServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class ElasticRendezvousClient {
 public:
  // Does not touch the network.
  ElasticRendezvousClient(const std::string& driver_address, const JobCredentials& credentials);
  ~ElasticRendezvousClient();

  // One Join call: the driver's answer (kPending when the generation is not formed within
  // kJoinAnswerWait). Unavailable when the driver cannot be reached by `deadline`;
  // FailedPrecondition when it cannot prove the job secret.
  StatusOr<ElasticAssignment> Join(const ElasticJoinRequest& request,
                                   std::chrono::steady_clock::time_point deadline);
  StatusOr<ElasticHostChanges> Poll(const std::string& worker_id, int64_t since, int64_t generation,
                                    std::chrono::steady_clock::time_point deadline);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kolo::transport
