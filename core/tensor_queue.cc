#include "core/tensor_queue.h"

#include <algorithm>
#include <tuple>

namespace kolo {

namespace {

thread_local bool tls_quiet = false;  // a QuietScope lives on this thread

// Entries Recycle keeps for NewEntry: a blocking op needs one at a time, a few async ones more.
constexpr size_t kSpareEntries = 8;

// Enqueue's error for a name that `existing` holds.
Status NameInFlight(const TensorEntry& existing) {
  return InvalidArgument("a " + OpTypeName(existing.meta.op) + " named '" + existing.meta.name +
                         "' is already in flight on this rank; wait for its callback before "
                         "reusing the name");
}

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
    // One lookup: this runs for every op. The last removed entry's node, its key's buffer
    // with it, is reused when there is one.
    Table::iterator slot;
    if (spare_node_.empty()) {
      bool added = false;
      std::tie(slot, added) = table_.try_emplace(name);
      if (!added) return NameInFlight(*slot->second);
    } else {
      spare_node_.key() = name;
      Table::insert_return_type inserted = table_.insert(std::move(spare_node_));
      if (!inserted.inserted) {
        spare_node_ = std::move(inserted.node);
        return NameInFlight(*inserted.position->second);
      }
      slot = inserted.position;
    }
    new_entries_.push_back(entry.get());
    slot->second = std::move(entry);
  }
  if (!tls_quiet) wakeup_->Notify();
  return Status::Ok();
}

std::unique_ptr<TensorEntry> TensorQueue::NewEntry() {
  {
    MutexLock lock(&mu_);
    if (!spare_entries_.empty()) {
      std::unique_ptr<TensorEntry> entry = std::move(spare_entries_.back());
      spare_entries_.pop_back();
      return entry;
    }
  }
  return std::make_unique<TensorEntry>();
}

void TensorQueue::Recycle(std::unique_ptr<TensorEntry> entry) {
  if (entry == nullptr) return;
  // As a new entry, but for the buffers its views' shapes and its strings hold; what the
  // callback and the allocator captured is released now, as the entry's end released it.
  entry->callback = nullptr;
  entry->allocate = nullptr;
  entry->received_splits = nullptr;
  entry->int_result = nullptr;
  entry->local_error = Status::Ok();
  entry->in_flight.store(false, std::memory_order_relaxed);
  entry->trace_generation = 0;
  entry->trace_slot = 0;
  entry->trace_track.clear();
  MutexLock lock(&mu_);
  if (spare_entries_.size() < kSpareEntries) spare_entries_.push_back(std::move(entry));
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
  Table::node_type node = table_.extract(it);
  std::unique_ptr<TensorEntry> entry = std::move(node.mapped());
  spare_node_ = std::move(node);  // for the next Enqueue
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
