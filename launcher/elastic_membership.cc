#include "launcher/elastic_membership.h"

#include <algorithm>
#include <cstdio>

#include "kolo/elastic.h"

namespace kolo::launcher {

using transport::ElasticAssignment;
using transport::ElasticHostChanges;
using transport::ElasticJoinRequest;
using transport::ElasticOutcome;

ElasticMembership::ElasticMembership(const Config& config)
    : config_(config), hosts_(config.cooldown_min_seconds, config.cooldown_max_seconds) {}

namespace {

// "15", "2.5": seconds as a user wrote them.
std::string Seconds(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", static_cast<double>(duration.count()) / 1000);
  return text;
}

}  // namespace

void ElasticMembership::AdvanceHostClock(int kinds) {
  ++host_clock_;
  host_changes_.emplace_back(host_clock_, kinds);
}

void ElasticMembership::StopWorker(Worker* worker, const std::string& reason) {
  worker->stop = true;
  worker->stop_reason = reason;
  worker->wants_after.reset();
  changed_.NotifyAll();
}

int ElasticMembership::LiveCount() const {
  int live = 0;
  for (const auto& [id, worker] : workers_) live += Live(worker) ? 1 : 0;
  return live;
}

void ElasticMembership::Blacklist(const Worker& worker, Clock::time_point now) {
  const std::string& host = worker.host.name;
  const std::string why =
      "worker " + worker.id + " failed with exit code " + std::to_string(worker.exit_code);
  std::string notice;
  bool newly = false;
  const bool whole_host =
      hosts_.BarAfterFailure(host, worker.slot, why, config_.min_np, now, &notice, &newly);
  notices_.push_back(notice);
  if (newly) AdvanceHostClock(elastic::kHostsRemoved);
  if (!whole_host) return;
  for (auto& [id, other] : workers_) {
    if (Live(other) && other.host.name == host) {
      StopWorker(&other, "its host " + host + " was blacklisted: " + why);
    }
  }
}

void ElasticMembership::UpdateHosts(const std::vector<Host>& hosts, Clock::time_point now) {
  (void)now;
  MutexLock lock(&mu_);
  // An addition is announced when a worker started there asks to join (Join), not here: a host
  // that gets no worker (every slot taken up to max_np) must not make the members re-form.
  const bool removed = hosts_.Update(hosts);
  for (auto& [id, worker] : workers_) {
    if (!Live(worker)) continue;
    const int slots = hosts_.SlotsOf(worker.host.name);
    if (slots == 0) {
      StopWorker(&worker, "its host " + worker.host.name + " is no longer listed");
    } else if (worker.slot >= slots) {
      StopWorker(&worker, "its host " + worker.host.name + " is listed with " +
                              std::to_string(slots) + " slot(s) now");
    }
  }
  if (removed) AdvanceHostClock(elastic::kHostsRemoved);
}

std::vector<ElasticMembership::WorkerToStart> ElasticMembership::TakeSlotsToFill(
    Clock::time_point now) {
  MutexLock lock(&mu_);
  std::vector<WorkerToStart> fill;
  if (finishing_) return fill;
  const int target = generation_ == 0 ? config_.initial_np : config_.max_np;
  int live = LiveCount();
  for (const Host& host : hosts_.listed()) {
    for (int slot = 0; slot < host.slots && live < target; ++slot) {
      if (!hosts_.SlotOpen(host.name, slot, now)) continue;
      const std::string id = ElasticWorkerId(host.name, slot);
      auto it = workers_.find(id);
      if (it != workers_.end() && !it->second.exited) continue;  // taken, or still stopping
      Worker worker;
      worker.id = id;
      worker.host = host;
      worker.slot = slot;
      workers_[id] = worker;
      fill.push_back({id, host, slot});
      ++live;
    }
  }
  return fill;
}

void ElasticMembership::OnWorkerExit(const std::string& worker_id, int exit_code,
                                     Clock::time_point now) {
  MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.exited) return;
  Worker& worker = it->second;
  worker.exited = true;
  worker.exit_code = exit_code;
  worker.wants_after.reset();
  if (exit_code == 0 && !worker.stop) {
    // Its training function returned: the job is ending, as in Horovod once a worker succeeded.
    if (!finishing_) finished_worker_ = worker_id;
    finishing_ = true;
  } else if (!worker.stop) {
    Blacklist(worker, now);
  }
  changed_.NotifyAll();
  TryForm(now);
}

std::vector<ElasticMembership::StopOrder> ElasticMembership::TakeWorkersToStop() {
  MutexLock lock(&mu_);
  std::vector<StopOrder> stop;
  for (auto& [id, worker] : workers_) {
    if (worker.stop && !worker.exited && !worker.stop_reported) {
      worker.stop_reported = true;
      stop.push_back({id, worker.stop_reason});
    }
  }
  return stop;
}

std::vector<std::string> ElasticMembership::TakeNotices() {
  MutexLock lock(&mu_);
  std::vector<std::string> notices;
  notices.swap(notices_);
  return notices;
}

void ElasticMembership::TryForm(Clock::time_point now) {
  (void)now;
  if (finishing_) return;
  if (config_.reset_limit >= 0 && generation_ > config_.reset_limit) return;  // Tick fails
  std::vector<Worker*> old_members;
  std::vector<Worker*> newcomers;
  for (auto& [id, worker] : workers_) {
    if (!Live(worker)) continue;
    const bool member = generation_ > 0 && worker.generation == generation_;
    if (!worker.wants_after.has_value()) {
      // A member still training holds the generation, and so does every worker at the job's
      // start; a newcomer still starting does not: it joins the one after (announced then).
      if (member || generation_ == 0) return;
      continue;
    }
    (member ? old_members : newcomers).push_back(&worker);
  }
  const size_t count = old_members.size() + newcomers.size();
  if (count == 0 || count < static_cast<size_t>(config_.min_np)) return;
  std::sort(old_members.begin(), old_members.end(),
            [](const Worker* a, const Worker* b) { return a->rank < b->rank; });
  std::vector<std::pair<std::pair<size_t, int>, Worker*>> keyed;  // (host index, slot)
  for (Worker* w : newcomers) keyed.push_back({{hosts_.IndexOf(w->host.name), w->slot}, w});
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) newcomers[i] = keyed[i].second;
  std::vector<Worker*> order = old_members;
  order.insert(order.end(), newcomers.begin(), newcomers.end());
  while (order.size() > static_cast<size_t>(config_.max_np)) {
    StopWorker(order.back(), "the generation has --max-np " + std::to_string(config_.max_np) +
                                 " workers without it");
    order.pop_back();
  }
  ++generation_;
  members_.clear();
  for (size_t r = 0; r < order.size(); ++r) {
    order[r]->generation = generation_;
    order[r]->rank = static_cast<int>(r);
    order[r]->wants_after.reset();
    members_.push_back(order[r]->id);
  }
  controller_address_ =
      order[0]->host.Reachable() + ":" + std::to_string(order[0]->controller_port);
  generation_hosts_timestamp_ = host_clock_;
  waiting_since_.reset();
  changed_.NotifyAll();
}

Status ElasticMembership::Tick(Clock::time_point now) {
  MutexLock lock(&mu_);
  shortfall_.reset();
  if (finishing_) return Status::Ok();
  if (config_.reset_limit >= 0 && generation_ > config_.reset_limit) {
    bool someone_waits = false;
    for (const auto& [id, worker] : workers_) someone_waits |= worker.wants_after.has_value();
    if (someone_waits) {
      return FailedPrecondition("the job was re-formed " + std::to_string(generation_ - 1) +
                                " times, the --reset-limit; it does not re-form again");
    }
  }
  TryForm(now);
  const int live = LiveCount();
  bool member_left = false;  // a member of the current generation asked for the next
  for (const auto& [id, worker] : workers_) {
    member_left |= Live(worker) && worker.wants_after.has_value() &&
                   worker.generation == generation_ && generation_ > 0;
  }
  const bool awaited = generation_ == 0 || member_left || live < config_.min_np;
  if (!awaited) {
    waiting_since_.reset();
    return Status::Ok();
  }
  if (!waiting_since_) waiting_since_ = now;
  if (live < config_.min_np && hosts_.known()) {
    if (std::optional<std::string> none = hosts_.NoneLeft()) {
      return FailedPrecondition(*none + "; " + std::to_string(live) +
                                " worker(s) left, fewer than --min-np " +
                                std::to_string(config_.min_np) +
                                " (--blacklist-cooldown-range lets a blacklisted host or slot be "
                                "used again)");
    }
    shortfall_ = Shortfall{live, *waiting_since_, *waiting_since_ + config_.elastic_timeout,
                           hosts_.InWords(now)};
  }
  if (now - *waiting_since_ < config_.elastic_timeout) return Status::Ok();
  const std::string waited = Seconds(config_.elastic_timeout) + " s (--elastic-timeout)";
  if (live < config_.min_np) {
    return FailedPrecondition("only " + std::to_string(live) + " worker(s) for " + waited +
                              ", fewer than --min-np " + std::to_string(config_.min_np) +
                              (shortfall_ ? " (" + shortfall_->hosts + ")" : ""));
  }
  // Enough workers, but some never asked to join: stop them, and form without them.
  for (auto& [id, worker] : workers_) {
    if (Live(worker) && !worker.wants_after.has_value()) {
      StopWorker(&worker, "it did not ask to join a generation within " + waited);
    }
  }
  waiting_since_ = now;
  return Status::Ok();
}

std::optional<ElasticMembership::Shortfall> ElasticMembership::ShortOfWorkers() const {
  MutexLock lock(&mu_);
  return shortfall_;
}

bool ElasticMembership::Finishing() const {
  MutexLock lock(&mu_);
  return finishing_;
}

bool ElasticMembership::AllExited() const {
  MutexLock lock(&mu_);
  for (const auto& [id, worker] : workers_) {
    if (!worker.exited) return false;
  }
  return true;
}

int ElasticMembership::ExitCode(int failure_code) const {
  if (failure_code != 0) return failure_code;  // the driver said why; every worker was stopped
  MutexLock lock(&mu_);
  if (!finishing_) return 1;  // no worker finished: the job did not do its work
  for (const std::string& id : members_) {
    const Worker& worker = workers_.at(id);
    if (worker.generation == generation_ && worker.exit_code != 0 && !worker.stop) {
      return worker.exit_code;
    }
  }
  if (members_.empty()) {  // never formed: a worker that failed before it joined
    for (const auto& [id, worker] : workers_) {
      if (worker.exit_code != 0 && !worker.stop) return worker.exit_code;
    }
  }
  return 0;
}

std::string ElasticMembership::Describe() const {
  MutexLock lock(&mu_);
  std::string text = "generation " + std::to_string(generation_) + ": " +
                     std::to_string(members_.size()) + " rank(s)";
  for (size_t r = 0; r < members_.size(); ++r) {
    text += (r == 0 ? " (" : ", ") + members_[r] + " rank " + std::to_string(r);
  }
  return text + (members_.empty() ? "" : ")") + ", controller " + controller_address_;
}

ElasticAssignment ElasticMembership::AnswerFor(const Worker& worker) const {
  ElasticAssignment answer;
  answer.outcome = ElasticOutcome::kAssigned;
  answer.generation = generation_;
  answer.rank = worker.rank;
  answer.size = static_cast<int>(members_.size());
  answer.controller_address = controller_address_;
  answer.job_id = config_.job_id + ".g" + std::to_string(generation_);
  answer.hostname = worker.host.name;
  answer.hosts_timestamp = generation_hosts_timestamp_;
  return answer;
}

std::optional<ElasticAssignment> ElasticMembership::RefusalFor(const std::string& id) const {
  auto it = workers_.find(id);
  ElasticAssignment refused;
  refused.outcome = ElasticOutcome::kRefused;
  if (it == workers_.end()) {
    refused.message = "kolorun started no worker '" + id + "'";
  } else if (it->second.exited || it->second.stop) {
    const std::string& why = it->second.stop_reason;
    refused.message = "worker " + id + " is no longer part of the job" +
                      (why.empty() ? std::string(" (it exited)") : ": " + why);
  } else if (finishing_) {
    refused.message = "the job is finishing (worker " + finished_worker_ +
                      " exited with code 0), so it forms no new generation";
  } else {
    return std::nullopt;
  }
  return refused;
}

ElasticAssignment ElasticMembership::Join(const ElasticJoinRequest& request,
                                          Clock::time_point deadline) {
  MutexLock lock(&mu_);
  const int64_t last = request.last_generation;
  const std::string& id = request.worker_id;
  if (auto refused = RefusalFor(id)) return *refused;
  Worker& worker = workers_.at(request.worker_id);
  if (worker.generation == generation_ && generation_ > last) return AnswerFor(worker);
  worker.wants_after = last;
  worker.controller_port = request.controller_port;
  if (generation_ > 0 && worker.generation != generation_ && !worker.announced) {
    // A newcomer: the members leave their loop at their next commit to take it in (Horovod's
    // "hosts added"), unless they are re-forming already and take it in now.
    worker.announced = true;
    AdvanceHostClock(elastic::kHostsAdded);
  }
  TryForm(Clock::now());
  changed_.WaitUntil(&mu_, deadline, [&]() KOLO_REQUIRES(mu_) {
    auto it = workers_.find(id);
    return it == workers_.end() || it->second.generation > last || RefusalFor(id).has_value();
  });
  if (auto refused = RefusalFor(id)) return *refused;
  const Worker& now = workers_.at(id);
  if (now.generation > last) return AnswerFor(now);
  ElasticAssignment pending;
  pending.outcome = ElasticOutcome::kPending;
  return pending;
}

ElasticHostChanges ElasticMembership::Poll(const std::string& worker_id, int64_t since,
                                           int64_t generation) {
  (void)worker_id;
  MutexLock lock(&mu_);
  ElasticHostChanges changes;
  changes.timestamp = host_clock_;
  for (const auto& [timestamp, kinds] : host_changes_) {
    if (timestamp > since) changes.kinds |= kinds;
  }
  if (generation > 0 && generation < generation_) {
    changes.lost_member = "generation " + std::to_string(generation_) + " formed since";
  } else if (generation > 0 && generation == generation_) {
    for (const std::string& id : members_) {
      const Worker& member = workers_.at(id);
      if (member.generation == generation_ && !Live(member)) {
        changes.lost_member = "worker " + id + " (rank " + std::to_string(member.rank) + ") " +
                              (member.exited ? "exited" : "is being stopped");
        changes.lost_rank = member.rank;
        break;
      }
    }
  }
  return changes;
}

}  // namespace kolo::launcher
