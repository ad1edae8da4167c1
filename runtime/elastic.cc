// kolo/elastic.h and runtime/elastic_join.h: an elastic job's worker side.
#include "kolo/elastic.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "core/free_port.h"
#include "core/mutex.h"
#include "runtime/elastic_join.h"
#include "runtime/job_credentials.h"
#include "transport/grpc/elastic_rendezvous.h"

namespace kolo {
namespace {

using MonoClock = std::chrono::steady_clock;

// What this process knows of its elastic job, from its last join.
struct ElasticState {
  Mutex mu;
  std::string driver_address KOLO_GUARDED_BY(mu);
  std::string worker_id KOLO_GUARDED_BY(mu);
  double call_timeout_seconds KOLO_GUARDED_BY(mu) = 30;
  std::shared_ptr<transport::ElasticRendezvousClient> client KOLO_GUARDED_BY(mu);
  int64_t generation KOLO_GUARDED_BY(mu) = 0;
  int64_t hosts_timestamp KOLO_GUARDED_BY(mu) = 0;
};

ElasticState& ProcessState() {
  static ElasticState* state = new ElasticState();  // never destroyed: used until exit
  return *state;
}

// A copy of what a call to the driver needs, taken under the state's lock.
struct DriverLink {
  std::shared_ptr<transport::ElasticRendezvousClient> client;  // null before the first join
  std::string worker_id;
  double timeout_seconds = 30;
  int64_t generation = 0;
  int64_t hosts_timestamp = 0;
};

DriverLink CurrentLink() {
  ElasticState& state = ProcessState();
  MutexLock lock(&state.mu);
  return {state.client, state.worker_id, state.call_timeout_seconds, state.generation,
          state.hosts_timestamp};
}

MonoClock::time_point After(double seconds) {
  return MonoClock::now() +
         std::chrono::duration_cast<MonoClock::duration>(std::chrono::duration<double>(seconds));
}

// The process's client of the driver at options.elastic_rendezvous (a new one where the driver
// moved), with this join's worker id and timeout recorded; `last_generation`: the generation
// this process last joined (0: none).
std::shared_ptr<transport::ElasticRendezvousClient> LinkForJoin(
    const Options& options, const transport::JobCredentials& credentials,
    int64_t* last_generation) {
  ElasticState& state = ProcessState();
  MutexLock lock(&state.mu);
  if (!state.client || state.driver_address != options.elastic_rendezvous) {
    state.client = std::make_shared<transport::ElasticRendezvousClient>(options.elastic_rendezvous,
                                                                        credentials);
    state.driver_address = options.elastic_rendezvous;
  }
  state.worker_id = options.elastic_worker_id;
  state.call_timeout_seconds = options.timeout_seconds;
  *last_generation = state.generation;
  return state.client;
}

// `options` as the driver's assignment makes them (rank, size, controller, job id, host), the
// generation recorded as this process's.
Options Joined(const Options& options, const transport::ElasticAssignment& answer) {
  Options joined = options;
  joined.rank = answer.rank;
  joined.size = answer.size;
  joined.local_rank = -1;  // from the host names every rank reports
  joined.local_size = -1;
  joined.controller_address = answer.controller_address;
  joined.job_id = answer.job_id;
  joined.host = answer.hostname;
  joined.identity_source = "kolorun (elastic)";
  joined.controller_source = "elastic generation " + std::to_string(answer.generation);
  ElasticState& state = ProcessState();
  MutexLock lock(&state.mu);
  state.generation = answer.generation;
  state.hosts_timestamp = answer.hosts_timestamp;
  return joined;
}

}  // namespace

namespace internal {

StatusOr<Options> JoinElasticGeneration(const Options& options) {
  if (options.elastic_worker_id.empty()) {
    return InvalidArgument(
        "KOLO_ELASTIC_RENDEZVOUS is set without KOLO_ELASTIC_WORKER_ID (kolorun's elastic mode "
        "sets both)");
  }
  // The rendezvous is sealed with the job's own id (kolorun's), not a generation's.
  KOLO_ASSIGN_OR_RETURN(transport::JobCredentials credentials, LoadJobCredentials(options));
  int64_t last_generation = 0;
  std::shared_ptr<transport::ElasticRendezvousClient> client =
      LinkForJoin(options, credentials, &last_generation);
  transport::ElasticJoinRequest request;
  request.worker_id = options.elastic_worker_id;
  request.last_generation = last_generation;
  KOLO_ASSIGN_OR_RETURN(request.controller_port, PickControllerPort());
  const MonoClock::time_point deadline = After(options.elastic_timeout_seconds);
  for (;;) {
    // The driver answers within kJoinAnswerWait; more than that plus KOLO_TIMEOUT_SECONDS
    // without an answer means it is gone.
    const MonoClock::time_point call_deadline =
        After(options.timeout_seconds) + transport::kJoinAnswerWait;
    StatusOr<transport::ElasticAssignment> answer = client->Join(request, call_deadline);
    if (!answer.ok()) return answer.status().WithContext("elastic init() of " + request.worker_id);
    if (answer->outcome == transport::ElasticOutcome::kRefused) {
      return FailedPrecondition("elastic init() of " + request.worker_id +
                                ": kolorun's driver refused it: " + answer->message);
    }
    if (answer->outcome == transport::ElasticOutcome::kAssigned) return Joined(options, *answer);
    if (MonoClock::now() >= deadline) {
      return DeadlineExceeded("elastic init() of " + request.worker_id +
                              ": kolorun's driver formed no generation with it within " +
                              std::to_string(options.elastic_timeout_seconds) +
                              " s (KOLO_ELASTIC_TIMEOUT_SECONDS, --elastic-timeout)");
    }
  }
}

bool LostMember(const Status& status) {
  switch (status.code()) {
    case StatusCode::kAborted:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kShutdown:
      return true;
    default:
      return false;
  }
}

struct ElasticStartWatch::State {
  Mutex mu;
  CondVar stop_cv;
  bool stop KOLO_GUARDED_BY(mu) = false;
  std::thread thread;
};

ElasticStartWatch::ElasticStartWatch(std::function<void(const std::string&, int)> on_lost)
    : state_(std::make_shared<State>()) {
  const DriverLink link = CurrentLink();
  if (!link.client || link.generation == 0) return;
  State* state = state_.get();
  state->thread = std::thread([state, link, on_lost = std::move(on_lost)] {
    for (;;) {
      {
        MutexLock lock(&state->mu);
        if (state->stop_cv.WaitFor(&state->mu, std::chrono::milliseconds(100),
                                   [&]() KOLO_REQUIRES(state->mu) { return state->stop; })) {
          return;
        }
      }
      StatusOr<transport::ElasticHostChanges> changes = link.client->Poll(
          link.worker_id, 0, link.generation, After(std::min(link.timeout_seconds, 5.0)));
      if (changes.ok() && !changes->lost_member.empty()) {
        on_lost(changes->lost_member, changes->lost_rank);
        return;
      }
    }
  });
}

ElasticStartWatch::~ElasticStartWatch() {
  {
    MutexLock lock(&state_->mu);
    state_->stop = true;
  }
  state_->stop_cv.NotifyAll();
  if (state_->thread.joinable()) state_->thread.join();
}

}  // namespace internal

namespace elastic {

bool enabled() {
  return CurrentLink().client != nullptr;
}

StatusOr<HostUpdates> poll_host_updates(int64_t since) {
  const DriverLink link = CurrentLink();
  if (!link.client) {
    return FailedPrecondition(
        "kolo::elastic::poll_host_updates: this process has not joined an elastic job (start "
        "it with kolorun --min-np/--max-np/--host-discovery-script, and call init() first)");
  }
  // Changes up to the current generation's formation are in it already.
  const int64_t after = std::max(since, link.hosts_timestamp);
  KOLO_ASSIGN_OR_RETURN(transport::ElasticHostChanges changes,
                        link.client->Poll(link.worker_id, after, 0, After(link.timeout_seconds)));
  HostUpdates updates;
  updates.kinds = changes.kinds;
  updates.timestamp = changes.kinds == kNoUpdate ? since : changes.timestamp;
  return updates;
}

int64_t generation() {
  ElasticState& state = ProcessState();
  MutexLock lock(&state.mu);
  return state.generation;
}

}  // namespace elastic
}  // namespace kolo
