#include "core/tensor_queue.h"

#include <algorithm>

namespace kolo {

namespace {

thread_local bool tls_quiet = false;  // a QuietScope lives on this thread

}  // namespace

TensorQueue::QuietScope::QuietScope() {
  tls_quiet = true;
}

TensorQueue::QuietScope::~QuietScope() {
  tls_quiet = false;
}

Status TensorQueue::Enqueue(std::unique_ptr<TensorEntry>&& entry) {
  {
    MutexLock lock(&mu_);
    if (is_closed_) return closed_;
    const std::string& name = entry->meta.name;
    auto [slot, added] = table_.try_emplace(name);  // one lookup: this runs for every op
    if (!added) {
      return InvalidArgument("a " + OpTypeName(slot->second->meta.op) + " named '" + name +
                             "' is already in flight on this rank; wait for its callback "
                             "before reusing the name");
    }
    new_entries_.push_back(entry.get());
    slot->second = std::move(entry);
  }
  if (!tls_quiet) wakeup_->Notify();
  return Status::Ok();
}

Status TensorQueue::EnqueueGroup(std::vector<std::unique_ptr<TensorEntry>>& entries) {
  {
    MutexLock lock(&mu_);
    if (is_closed_) return closed_;
    std::unordered_map<std::string, int> seen;
    for (const auto& entry : entries) {
      const std::string& name = entry->meta.name;
      if (table_.count(name) != 0 || seen[name]++ != 0) {
        return InvalidArgument("a grouped " + OpTypeName(entry->meta.op) + " names '" + name +
                               "', which is already in flight on this rank or twice in the "
                               "group");
      }
    }
    for (auto& entry : entries) {
      new_entries_.push_back(entry.get());
      const std::string name = entry->meta.name;
      table_.emplace(name, std::move(entry));
    }
    entries.clear();
  }
  if (!tls_quiet) wakeup_->Notify();
  return Status::Ok();
}

size_t TensorQueue::InFlight() {
  MutexLock lock(&mu_);
  return table_.size();
}

void TensorQueue::TakeNew(std::vector<TensorEntry*>* taken) {
  taken->clear();
  MutexLock lock(&mu_);
  taken->swap(new_entries_);
}

TensorEntry* TensorQueue::Find(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = table_.find(name);
  return it == table_.end() ? nullptr : it->second.get();
}

std::unique_ptr<TensorEntry> TensorQueue::Remove(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = table_.find(name);
  if (it == table_.end()) return nullptr;
  std::unique_ptr<TensorEntry> entry = std::move(it->second);
  table_.erase(it);
  new_entries_.erase(std::remove(new_entries_.begin(), new_entries_.end(), entry.get()),
                     new_entries_.end());
  return entry;
}

void TensorQueue::Close(const Status& why) {
  MutexLock lock(&mu_);
  if (is_closed_) return;
  is_closed_ = true;
  closed_ = why;
}

std::vector<std::unique_ptr<TensorEntry>> TensorQueue::RemoveAll() {
  MutexLock lock(&mu_);
  std::vector<std::unique_ptr<TensorEntry>> all;
  all.reserve(table_.size());
  for (auto it = table_.begin(); it != table_.end();) {
    if (it->second->in_flight) {
      ++it;  // its executor completes it
      continue;
    }
    all.push_back(std::move(it->second));
    it = table_.erase(it);
  }
  new_entries_.clear();
  // Callers fail these in enqueue order so users see a stable order.
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a->enqueued_at < b->enqueued_at; });
  return all;
}

}  // namespace kolo
