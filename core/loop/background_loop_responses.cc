// The background loop's execution of decided responses: the controller's (checked for
// sequence, updating the response cache) and the fast path's, the zero stand-ins of a joined
// rank, and completing the entries. Loop thread only.
#include <algorithm>
#include <optional>

#include "core/loop/background_loop.h"

namespace kolo {

void BackgroundLoop::RunControllerResponse(const Response& response) {
  if (response.seq != last_seq_ + 1) {
    Abort(Internal("protocol error: response " + std::to_string(response.seq) + " arrived after " +
                   std::to_string(last_seq_)),
          TellController::kYes);
    return;
  }
  last_seq_ = response.seq;
  if (response.process_set != 0) {
    if (config_.process_sets == nullptr || !config_.process_sets->Known(response.process_set)) {
      Abort(Internal("protocol error: response " + std::to_string(response.seq) +
                     " is for process set " + std::to_string(response.process_set) +
                     ", which this rank does not know"),
            TellController::kYes);
      return;
    }
    // Only the set's members run it; the others move on to the next response.
    if (!config_.process_sets->IsMember(response.process_set)) return;
  }
  std::vector<TensorEntry*> entries;
  entries.reserve(response.names.size());
  for (const std::string& name : response.names) {
    TensorEntry* entry = queue_->Find(name);
    if (entry == nullptr && response.is_error()) {
      continue;  // an op that failed before this rank submitted it (e.g. a peer shut down)
    }
    if (entry == nullptr && HasJoined(response.process_set) && response.op == OpType::kAllreduce) {
      entry = StandIn(response, entries.size());  // this rank joined: it contributes zeros
    }
    if (entry == nullptr) {
      Abort(Internal("protocol error: the controller decided on '" + name +
                     "', which this rank never submitted"),
            TellController::kYes);
      return;
    }
    entries.push_back(entry);
  }
  if (response.is_error()) {
    for (const std::string& name : response.names) {
      auto slot = cache_.find(name);
      // This instance is over: the next may take the fast path.
      if (slot != cache_.end() && fast_path_on()) fast_->InstanceOver(slot->second.id);
    }
  } else {
    RememberCacheIds(response, entries);
  }
  Execute(response, entries);
}

void BackgroundLoop::RememberCacheIds(const Response& response,
                                      const std::vector<TensorEntry*>& entries) {
  // The controller's cache id for each name, as of this response; 0 retires the old one.
  for (size_t i = 0; i < response.names.size() && i < entries.size(); ++i) {
    const std::string& name = response.names[i];
    auto old = cache_.find(name);
    const uint32_t id = i < response.cache_ids.size() ? response.cache_ids[i] : 0;
    if (fast_path_on() && old != cache_.end()) {
      fast_->InstanceOver(old->second.id);  // this instance ran: the next may take the fast path
      if (old->second.id != id) fast_->Forget(old->second.id);
    }
    if (id == 0) {
      cache_.erase(name);
      continue;
    }
    cache_[name] = CacheSlot{id, entries[i]->meta};
    if (fast_path_on() && response.op == OpType::kAllreduce && entries[i]->meta.group.empty() &&
        response.process_set == 0) {
      fast_->Learn(id, FastSpec{name, response.dtype, response.reduce_op, response.prescale,
                                response.postscale,
                                i < response.num_elements.size() ? response.num_elements[i] : 0});
    }
  }
}

void BackgroundLoop::Execute(const Response& response, const std::vector<TensorEntry*>& entries) {
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
    Executor* executor = ExecutorFor(response.process_set);
    if (executor == nullptr) {
      Abort(Internal("no executor for process set " + std::to_string(response.process_set)),
            TellController::kYes);
      return;
    }
    if (!entries.empty() && executor->RunsAsync(response)) {
      Launch(response, entries);
      return;
    }
    if (!entries.empty()) {
      std::optional<OpTracer::Phases> phases;
      if (traced) phases.emplace(*tracer_, entries);
      status = executor->Execute(response, entries, phases ? &*phases : nullptr);
      if (!status.ok()) {
        stand_ins_.clear();
        stand_in_data_.clear();
        Abort(RootCause(status), TellController::kYes);  // also fails these entries with it
        return;
      }
    }
  }
  // A name this rank ran with zeros is not its own: an entry of that name in the queue (the
  // next one, enqueued since) must stay there.
  std::vector<std::string> zero_names;
  for (const auto& stand_in : stand_ins_) zero_names.push_back(stand_in->meta.name);
  stand_ins_.clear();
  stand_in_data_.clear();
  if (response.op == OpType::kJoin && !response.is_error()) FinishJoin(response, entries);
  CompleteResponse(response, status, zero_names);
}

Executor* BackgroundLoop::ExecutorFor(int process_set) const {
  if (process_set == 0) return executor_;
  return config_.set_executor ? config_.set_executor(process_set) : nullptr;
}

void BackgroundLoop::FinishJoin(const Response& response,
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
    if (fast_path_on()) fast_->SetJoined(false);
  }
  for (TensorEntry* e : entries) {
    if (e->int_result != nullptr) *e->int_result = last;
  }
}

void BackgroundLoop::CompleteResponse(const Response& response, const Status& status,
                                      const std::vector<std::string>& skip) {
  // Removing only now keeps each name in flight until its result is in place; Complete
  // skips names this rank never submitted.
  for (const std::string& name : response.names) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    std::unique_ptr<TensorEntry> entry = queue_->Remove(name);
    if (entry != nullptr && !entry->local_error.ok()) {
      const Status local = entry->local_error;
      Complete(std::move(entry), local, &response);
    } else {
      Complete(std::move(entry), status, &response);
    }
  }
}

bool BackgroundLoop::HasJoined(int process_set) const {
  if (process_set == 0) return joined_;
  return std::find(joined_sets_.begin(), joined_sets_.end(), process_set) != joined_sets_.end();
}

void BackgroundLoop::ApplyProcessSetDecision(const Response& response,
                                             const std::vector<TensorEntry*>& entries) {
  ProcessSets* sets = config_.process_sets;
  if (sets == nullptr) return;  // no entries either: nothing waits for it
  if (response.op == OpType::kAddProcessSet) {
    if (response.is_error()) return;
    std::vector<int> ranks(response.splits.begin(), response.splits.end());
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
  if (config_.set_removed) config_.set_removed(response.root);
}

TensorEntry* BackgroundLoop::StandIn(const Response& response, size_t index) {
  const int64_t count = index < response.num_elements.size() ? response.num_elements[index] : 0;
  stand_in_data_.emplace_back(static_cast<size_t>(count) * DataTypeSize(response.dtype), 0);
  auto entry = std::make_unique<TensorEntry>();
  entry->meta.name = response.names[index];
  entry->meta.dtype = response.dtype;
  entry->meta.shape = {count};
  entry->input = {stand_in_data_.back().data(), response.dtype, {count}, Device::Cpu()};
  entry->output = entry->input;
  stand_ins_.push_back(std::move(entry));
  return stand_ins_.back().get();
}

}  // namespace kolo
