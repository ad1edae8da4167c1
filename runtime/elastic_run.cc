// kolo::elastic::State and Run (kolo/elastic.h): the C++ elastic training loop.
#include <vector>

#include "kolo/elastic.h"
#include "kolo/kolo.h"
#include "runtime/elastic_join.h"

namespace kolo::elastic {
StatusOr<bool> State::Commit() {
  Save();
  if (!enabled()) return false;
  // Rank 0's view, broadcast: every rank leaves at the same commit (Horovod's
  // check_host_updates): whether hosts were added, and the driver's clock seen.
  std::vector<int64_t> answer = {0, hosts_seen_};
  if (rank() == 0) {
    KOLO_ASSIGN_OR_RETURN(HostUpdates updates, poll_host_updates(hosts_seen_));
    answer = {updates.kinds, updates.timestamp};
  }
  const TensorView view{answer.data(), DataType::kInt64, {2}, Device::Cpu()};
  KOLO_RETURN_IF_ERROR(broadcast("kolo.elastic.commit", view, 0));
  hosts_seen_ = answer[1];
  hosts_updated_ = answer[0] != kNoUpdate;
  // Only removed: the survivors' states agree, no sync needed (Horovod's skip_sync).
  skip_sync_ = answer[0] == kHostsRemoved;
  return hosts_updated_;
}

namespace {

// Whether every rank of the generation just formed may skip the sync: each left the last one
// at a commit that reported hosts removed only. A rank that restored after a failure, or a
// newcomer, must be sent the state, and a sync that only some ranks enter never ends (the
// others' first op waits on a different name: kolo issue 53, F6). One int32 min-allreduce per
// generation, on every rank of an elastic job.
StatusOr<bool> EveryRankSkipsSync(bool skip) {
  if (!enabled()) return skip;  // a fixed job: Run runs once, nobody skips
  int32_t skips = skip ? 1 : 0;
  const TensorView view{&skips, DataType::kInt32, {1}, Device::Cpu()};
  AllreduceOptions every;
  every.op = ReduceOp::kMin;
  KOLO_RETURN_IF_ERROR(allreduce("kolo.elastic.skip_sync", view, view, every));
  return skips == 1;
}

}  // namespace

void State::RegisterResetCallback(std::function<void()> callback) {
  reset_callbacks_.push_back(std::move(callback));
}

Status Run(State* state, const std::function<Status()>& train) {
  for (bool reset = false;; reset = true) {
    KOLO_RETURN_IF_ERROR(init());
    if (reset) {
      for (const auto& callback : state->reset_callbacks_) callback();
    }
    StatusOr<bool> skip = EveryRankSkipsSync(state->skip_sync_);
    Status trained = !skip.ok() ? skip.status() : *skip ? Status::Ok() : state->Sync();
    state->hosts_updated_ = false;
    state->skip_sync_ = false;
    if (trained.ok()) trained = train();
    const bool hosts_added = state->hosts_updated_;
    if (trained.ok() && !hosts_added) return shutdown();
    if (!hosts_added && !internal::LostMember(trained)) {
      shutdown().IgnoreError();  // the training error is the one to report
      return trained;
    }
    // A lost rank makes shutdown() report that loss, which `trained` already says.
    shutdown().IgnoreError();
    if (!hosts_added) state->Restore();
  }
}

}  // namespace kolo::elastic
