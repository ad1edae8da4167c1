#include "python/csrc/handle_table.h"

#include <utility>

namespace kolo::torch_ext {

int64_t HandleTable::Add(std::shared_ptr<PendingOp> op) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t id = next_id_++;
  ops_.emplace(id, std::move(op));
  return id;
}

std::shared_ptr<PendingOp> HandleTable::Find(int64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ops_.find(id);
  return it == ops_.end() ? nullptr : it->second;
}

void HandleTable::Erase(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  ops_.erase(id);
}

std::vector<int64_t> HandleTable::EraseCompleted() {
  std::vector<std::shared_ptr<PendingOp>> erased;  // destroyed after the lock is released
  std::vector<int64_t> ids;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = ops_.begin(); it != ops_.end();) {
    if (it->second->handle.Poll()) {
      ids.push_back(it->first);
      erased.push_back(std::move(it->second));
      it = ops_.erase(it);
    } else {
      ++it;
    }
  }
  return ids;
}

}  // namespace kolo::torch_ext
