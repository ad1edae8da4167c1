// ElasticMembership: what kolorun's elastic driver knows of an elastic job (docs/ELASTIC.md):
// the hosts it may run workers on (discovered, blacklisted, cooling down), the workers it
// started, and the generations it formed from them. It decides which slots get a new worker,
// when the next generation forms and who is in it, which workers must stop, and when the job
// is over. No I/O: the driver's loop (elastic_driver.cc) starts and stops processes and runs
// the discovery script; the rendezvous server (transport/grpc/elastic_rendezvous.h) calls
// Join and Poll.
//
// A generation forms when every live member of the current one (every started worker, at the
// job's start) has asked to join the next (a failure made every survivor's ops fail, or every
// rank left its loop at a commit), with the newcomers that asked too, and there are at least
// min_np of them. A newcomer that asks while the members train advances the host clock ("hosts
// added", what Poll reports), so they leave at their next commit; one still starting holds no
// one up. Ranks keep the previous generation's order (so rank 0
// is an old member whenever one is left, and the state a loop syncs comes from it), new
// workers follow in host and slot order. A worker whose process fails blacklists its host (as
// Horovod: the host's other workers stop, the host gets no new workers until its cooldown, if
// any, ends) when the other hosts still have min_np slots; otherwise only its slot, so that a
// job on one host outlives a failed worker. Below min_np the job waits elastic_timeout for
// hosts (ShortOfWorkers says for what), and fails at once when every listed host is
// blacklisted for good. Only a job some worker finished (exited 0) ends with code 0.
//
// Threading: thread-safe. Join waits on a condition variable (on the server's threads); every
// other method returns at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "kolo/status.h"
#include "launcher/elastic_hosts.h"
#include "launcher/host_list.h"
#include "transport/grpc/elastic_rendezvous.h"

namespace kolo::launcher {

class ElasticMembership final : public transport::ElasticMembershipService {
 public:
  using Clock = std::chrono::steady_clock;

  struct Config {
    int initial_np = 1;  // workers started at first (-np)
    int min_np = 1;      // fewer live workers than this for elastic_timeout ends the job
    int max_np = 1;      // never more workers than this
    // How long the job may wait for min_np workers, or for every live worker to join.
    std::chrono::milliseconds elastic_timeout{600000};
    int reset_limit = -1;  // the most re-formations after the first generation; -1: no limit
    // Horovod's --blacklist-cooldown-range: a blacklisted host may be used again after a
    // cooldown of min·2^n plus up to min more seconds (n: its blacklistings), at most max.
    // min 0: never again.
    double cooldown_min_seconds = 0;
    double cooldown_max_seconds = 0;
    std::string job_id;  // the job's; generation g's is job_id + ".g" + g
  };

  struct WorkerToStart {
    std::string worker_id;  // "host:slot"
    Host host;
    int slot = 0;
  };
  struct StopOrder {
    std::string worker_id;
    std::string reason;  // "its host h was blacklisted: worker h:1 failed with exit code 137"
  };
  // Fewer live workers than min_np: how many, since when, until when the job waits.
  struct Shortfall {
    int live = 0;
    Clock::time_point since;
    Clock::time_point until;
    std::string hosts;  // what discovery lists now and what is blacklisted, in words
  };

  explicit ElasticMembership(const Config& config);

  // ---- the driver's loop ----

  // The hosts discovery found now (in their order of preference). A host that is new or has
  // more slots is an addition, one gone or with fewer slots a removal; both advance the host
  // clock that Poll reports. Workers on slots that are gone are to stop.
  void UpdateHosts(const std::vector<Host>& hosts, Clock::time_point now);
  // Free slots that should get a worker now (each is then counted as started): on usable hosts,
  // up to initial_np workers until the first generation formed, up to max_np after. None once
  // the job is finishing.
  std::vector<WorkerToStart> TakeSlotsToFill(Clock::time_point now);
  // A worker's process ended: `exit_code` 0 is success (the job is then finishing: no further
  // generation forms), else a failure that blacklists its host (or slot) unless the driver
  // stopped it.
  void OnWorkerExit(const std::string& worker_id, int exit_code, Clock::time_point now);
  // Workers the driver must stop (their host was removed or blacklisted, they were refused, or
  // they did not join within elastic_timeout), with the reason; each is returned once.
  std::vector<StopOrder> TakeWorkersToStop();
  // What the membership decided that kolorun should say (a host or a slot blacklisted, and
  // why), each once.
  std::vector<std::string> TakeNotices();
  // Forms a generation when it can; checks the deadlines. Fails (then every worker is to stop)
  // when the job cannot go on, saying why: fewer than min_np workers for elastic_timeout, no
  // listed host left that is not blacklisted for good, the reset limit.
  Status Tick(Clock::time_point now);
  // Set while there are fewer live workers than min_np (after Tick).
  std::optional<Shortfall> ShortOfWorkers() const;
  // Some worker exited 0 (its training function returned): the job is ending.
  bool Finishing() const;
  // Every started worker has exited.
  bool AllExited() const;
  // kolorun's exit code once AllExited: `failure_code` when the job failed in Tick; 1 when no
  // worker finished (a job that did not finish never exits 0); 0 when every member of the last
  // generation exited 0 (or was stopped by the driver), else the first of their failures' codes.
  int ExitCode(int failure_code) const;
  // A line about the current generation, for kolorun's messages ("generation 2: 3 ranks ...").
  std::string Describe() const;

  // ---- the rendezvous server (gRPC threads) ----
  // Join: see ElasticMembershipService. Poll: host changes after `since`; lost_member names a
  // member of `generation` that exited or is being stopped, or says a newer generation formed.
  transport::ElasticAssignment Join(const transport::ElasticJoinRequest& request,
                                    Clock::time_point deadline) override;
  transport::ElasticHostChanges Poll(const std::string& worker_id, int64_t since,
                                     int64_t generation) override;

 private:
  struct Worker {
    std::string id;
    Host host;
    int slot = 0;
    bool exited = false;
    bool stop = false;           // the driver stops it (or stopped it)
    bool stop_reported = false;  // returned by TakeWorkersToStop
    std::string stop_reason;
    int exit_code = 0;
    std::optional<int64_t> wants_after;  // asked to join a generation after this one
    bool announced = false;              // its join advanced the host clock (a newcomer)
    int controller_port = 0;
    int64_t generation = 0;  // the last it is a member of; 0: none
    int rank = -1;           // its rank in that generation
  };
  bool Live(const Worker& w) const { return !w.exited && !w.stop; }
  int LiveCount() const KOLO_REQUIRES(mu_);
  // After `worker` failed: blacklists its host (stopping its other workers), or only its slot
  // when the other hosts lack min_np open slots (ElasticHosts::BarAfterFailure).
  void Blacklist(const Worker& worker, Clock::time_point now) KOLO_REQUIRES(mu_);
  void AdvanceHostClock(int kinds) KOLO_REQUIRES(mu_);
  void StopWorker(Worker* worker, const std::string& reason) KOLO_REQUIRES(mu_);
  void TryForm(Clock::time_point now) KOLO_REQUIRES(mu_);
  transport::ElasticAssignment AnswerFor(const Worker& worker) const KOLO_REQUIRES(mu_);
  // Why worker `id` may not join, or nullopt when it may.
  std::optional<transport::ElasticAssignment> RefusalFor(const std::string& id) const
      KOLO_REQUIRES(mu_);

  const Config config_;
  mutable Mutex mu_;
  CondVar changed_;  // with mu_: a generation formed, a worker stopped, the job is finishing
  ElasticHosts hosts_ KOLO_GUARDED_BY(mu_);  // the last discovery, and what is blacklisted
  std::map<std::string, Worker> workers_ KOLO_GUARDED_BY(mu_);  // by id
  int64_t generation_ KOLO_GUARDED_BY(mu_) = 0;
  std::vector<std::string> members_ KOLO_GUARDED_BY(mu_);  // of generation_, in rank order
  std::string controller_address_ KOLO_GUARDED_BY(mu_);    // of generation_
  int64_t host_clock_ KOLO_GUARDED_BY(mu_) = 0;
  int64_t generation_hosts_timestamp_ KOLO_GUARDED_BY(mu_) = 0;  // host_clock_ at its forming
  // (timestamp, kinds) of every host change, ascending.
  std::vector<std::pair<int64_t, int>> host_changes_ KOLO_GUARDED_BY(mu_);
  bool finishing_ KOLO_GUARDED_BY(mu_) = false;  // some worker exited 0
  std::string finished_worker_ KOLO_GUARDED_BY(mu_);
  // Since when some live worker has waited to join, or live workers were fewer than min_np.
  std::optional<Clock::time_point> waiting_since_ KOLO_GUARDED_BY(mu_);
  std::optional<Shortfall> shortfall_ KOLO_GUARDED_BY(mu_);  // as of the last Tick
  std::vector<std::string> notices_ KOLO_GUARDED_BY(mu_);
};

}  // namespace kolo::launcher
