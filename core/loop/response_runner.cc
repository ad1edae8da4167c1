#include "core/loop/response_runner.h"

#include <algorithm>
#include <optional>

namespace kolo {

ResponseRunner::ResponseRunner(Config config, TensorQueue* queue, Executor* executor,
                               const OpCompleter* completer, AsyncOps* async, OpTracer* tracer,
                               const Clock* clock, int size, bool fast_path)
    : config_(std::move(config)),
      queue_(queue),
      executor_(executor),
      completer_(completer),
      async_(async),
      tracer_(tracer),
      clock_(clock),
      cache_(size, fast_path) {}

void ResponseRunner::NoteJoin(const TensorEntry& join) {
  if (join.meta.process_set != 0) {
    joined_sets_.push_back(join.meta.process_set);
    return;
  }
  joined_ = true;
}

Fault ResponseRunner::RunControllerResponse(const Response& response) {
  if (response.seq != last_seq_ + 1) {
    return Fault::Here(Internal("protocol error: response " + std::to_string(response.seq) +
                                " arrived after " + std::to_string(last_seq_)));
  }
  last_seq_ = response.seq;
  if (response.process_set != 0) {
    if (config_.process_sets == nullptr || !config_.process_sets->Known(response.process_set)) {
      return Fault::Here(Internal("protocol error: response " + std::to_string(response.seq) +
                                  " is for process set " + std::to_string(response.process_set) +
                                  ", which this rank does not know"));
    }
    // Only the set's members run it; the others move on to the next response.
    if (!config_.process_sets->IsMember(response.process_set)) {
      cache_.RememberForeign(response);
      return Fault();
    }
  }
  std::vector<TensorEntry*> entries;
  entries.reserve(response.names.size());
  for (const std::string& name : response.names) {
    TensorEntry* entry = queue_->Find(name);
    if (entry == nullptr && response.is_error()) {
      continue;  // an op that failed before this rank submitted it (e.g. a peer shut down)
    }
    if (entry == nullptr && HasJoined(response.process_set) && response.op == OpType::kAllreduce) {
      entry = stand_ins_.Add(response, entries.size());  // this rank joined: it adds zeros
    }
    if (entry == nullptr) {
      return Fault::Here(Internal("protocol error: the controller decided on '" + name +
                                  "', which this rank never submitted"));
    }
    entries.push_back(entry);
  }
  if (!response.is_error()) cache_.Remember(response, entries);
  return Execute(response, entries);
}

Fault ResponseRunner::RunRoundWork(WorkOrder::Work& work) {
  for (size_t i = 0; i < work.entries.size(); ++i) {
    // Joined without it: this rank contributes zeros.
    if (work.entries[i] == nullptr) work.entries[i] = stand_ins_.Add(work.response, i);
  }
  return Execute(work.response, work.entries);
}

Fault ResponseRunner::Execute(const Response& response, const std::vector<TensorEntry*>& entries) {
  const bool traced = tracer_ != nullptr && OpTracer::AnyOpened(entries);
  if (traced) tracer_->Taken(entries, clock_->Now());
  // An error response must never reach a callback as OK, whatever code it carries.
  const StatusCode code =
      response.error_code == StatusCode::kOk ? StatusCode::kMismatch : response.error_code;
  Status status = response.is_error() ? Status(code, response.error) : Status::Ok();
  const bool set_decision =
      response.op == OpType::kAddProcessSet || response.op == OpType::kRemoveProcessSet;
  if (set_decision) ApplyProcessSetDecision(response, entries);
  if (!response.is_error() && !set_decision) {
    if (config_.autotuner != nullptr && !config_.autotuner->done() &&
        response.op == OpType::kAllreduce) {
      ObserveAllreduce(response, entries);
    }
    Executor* executor = ExecutorFor(response.process_set);
    if (executor == nullptr) {
      return Fault::Here(
          Internal("no executor for process set " + std::to_string(response.process_set)));
    }
    if (!entries.empty() && executor->RunsAsync(response)) {
      // The stand-ins go with the op, alive until it completed.
      StandIns stand_ins = std::move(stand_ins_);
      stand_ins_.Clear();
      return Fault::InCollective(async_->Launch(response, entries, std::move(stand_ins)));
    }
    if (!entries.empty()) {
      std::optional<OpTracer::Phases> phases;
      if (traced) phases.emplace(*tracer_, entries);
      status = executor->Execute(response, entries, phases ? &*phases : nullptr);
      if (!status.ok()) {
        stand_ins_.Clear();
        return Fault::InCollective(status);  // the abort also fails these entries with it
      }
    }
  }
  // A name this rank ran with zeros is not its own: an entry of that name in the queue (the
  // next one, enqueued since) must stay there.
  const std::vector<std::string> zero_names = stand_ins_.Names();
  stand_ins_.Clear();
  if (response.op == OpType::kJoin && !response.is_error()) FinishJoin(response, entries);
  completer_->CompleteResponse(response, status, zero_names);
  return Fault();
}

Executor* ResponseRunner::ExecutorFor(int process_set) const {
  if (process_set == 0) return executor_;
  return config_.set_executor ? config_.set_executor(process_set) : nullptr;
}

bool ResponseRunner::HasJoined(int process_set) const {
  if (process_set == 0) return joined_;
  return std::find(joined_sets_.begin(), joined_sets_.end(), process_set) != joined_sets_.end();
}

void ResponseRunner::FinishJoin(const Response& response,
                                const std::vector<TensorEntry*>& entries) {
  int last = response.root;
  if (response.process_set != 0) {
    joined_sets_.erase(std::remove(joined_sets_.begin(), joined_sets_.end(), response.process_set),
                       joined_sets_.end());
    // The set's table counts its members; the caller gets a job rank, as for broadcast roots.
    const std::vector<int> members = config_.process_sets->Members(response.process_set);
    if (last >= 0 && last < static_cast<int>(members.size())) {
      last = members[static_cast<size_t>(last)];
    }
  } else {  // only the controller's
    joined_ = false;
  }
  for (TensorEntry* e : entries) {
    if (e->int_result != nullptr) *e->int_result = last;
  }
}

void ResponseRunner::ApplyProcessSetDecision(const Response& response,
                                             const std::vector<TensorEntry*>& entries) {
  ProcessSets* sets = config_.process_sets;
  if (sets == nullptr) return;  // no entries either: nothing waits for it
  if (response.op == OpType::kAddProcessSet) {
    if (response.is_error()) return;
    std::vector<int> ranks(response.splits.begin(), response.splits.end());
    cache_.KnowSet(response.root, ranks);
    sets->Add(response.root, std::move(ranks));
    for (TensorEntry* e : entries) {
      if (e->int_result != nullptr) *e->int_result = response.root;  // the new set's id
    }
    return;
  }
  // Removal: the set's id is in the request's root, which the response carries.
  if (response.is_error()) {
    sets->EndRemove(response.root);
    return;
  }
  sets->Remove(response.root);
  cache_.ForgetSet(response.root);
  if (config_.set_removed) config_.set_removed(response.root);
}

void ResponseRunner::ObserveAllreduce(const Response& response,
                                      const std::vector<TensorEntry*>& entries) {
  int64_t bytes = 0;
  for (const TensorEntry* entry : entries) {
    if (entry != nullptr) bytes += static_cast<int64_t>(entry->input.num_bytes());
  }
  config_.autotuner->Observe(response.names, bytes, clock_->Now());
}

}  // namespace kolo
