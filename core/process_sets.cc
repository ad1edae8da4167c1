#include "core/process_sets.h"

#include <algorithm>
#include <cctype>

namespace kolo {
namespace {

thread_local int current_process_set = 0;

std::string RanksText(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

}  // namespace

std::string ScopedName(int process_set, const std::string& name) {
  if (process_set == 0) return name;
  return name + " [process set " + std::to_string(process_set) + "]";
}

StatusOr<std::vector<int>> CheckSetRanks(const std::vector<int>& ranks, int size) {
  if (ranks.empty()) return InvalidArgument("a process set needs at least one rank");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= size) {
      return InvalidArgument("process set ranks " + RanksText(ranks) + ": rank " +
                             std::to_string(sorted[i]) + " is out of range for a job of " +
                             std::to_string(size) + " ranks");
    }
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return InvalidArgument("process set ranks " + RanksText(ranks) + ": rank " +
                             std::to_string(sorted[i]) + " appears twice");
    }
  }
  return sorted;
}

StatusOr<std::vector<std::vector<int>>> ParseProcessSets(const std::string& text, int size) {
  std::vector<std::vector<int>> sets;
  std::string trimmed;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) trimmed += c;
  }
  if (trimmed.empty()) return sets;
  size_t start = 0;
  while (start <= trimmed.size()) {
    const size_t end = std::min(trimmed.find(';', start), trimmed.size());
    const std::string part = trimmed.substr(start, end - start);
    start = end + 1;
    if (part.empty() && end == trimmed.size()) break;  // a trailing ';'
    std::vector<int> ranks;
    size_t pos = 0;
    while (pos <= part.size()) {
      const size_t comma = std::min(part.find(',', pos), part.size());
      const std::string number = part.substr(pos, comma - pos);
      pos = comma + 1;
      if (number.empty() || number.size() > 9 ||
          !std::all_of(number.begin(), number.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        return InvalidArgument("'" + text +
                               "' is not a list of process sets such as \"0,1;2,3\" ('" + part +
                               "' is not a list of ranks)");
      }
      ranks.push_back(std::stoi(number));
    }
    KOLO_ASSIGN_OR_RETURN(std::vector<int> sorted, CheckSetRanks(ranks, size));
    sets.push_back(std::move(sorted));
  }
  return sets;
}

StatusOr<SetMembership> ProcessSets::ResolveLocked(int id, const std::string& what) const {
  SetMembership membership;
  if (id == 0) {
    membership.rank = rank_;
    membership.size = size_;
    return membership;
  }
  auto it = sets_.find(id);
  if (it == sets_.end()) {
    return InvalidArgument(what + " on rank " + std::to_string(rank_) + ": process set " +
                           std::to_string(id) +
                           " is unknown (never added, or removed); add_process_set() returns "
                           "the ids");
  }
  const std::vector<int>& ranks = it->second.ranks;
  auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) {
    return InvalidArgument(what + ": rank " + std::to_string(rank_) + " is not in process set " +
                           std::to_string(id) + " (ranks " + RanksText(ranks) +
                           "), so it cannot submit to it");
  }
  if (it->second.removing) {
    return FailedPrecondition(what + " on rank " + std::to_string(rank_) + ": process set " +
                              std::to_string(id) + " is being removed");
  }
  membership.id = id;
  membership.rank = static_cast<int>(me - ranks.begin());
  membership.size = static_cast<int>(ranks.size());
  return membership;
}

StatusOr<SetMembership> ProcessSets::Resolve(int id, const std::string& what) const {
  MutexLock lock(&mu_);
  return ResolveLocked(id, what);
}

Status ProcessSets::Enqueue(int id, const std::string& what,
                            const std::function<Status()>& enqueue) const {
  MutexLock lock(&mu_);
  KOLO_RETURN_IF_ERROR(ResolveLocked(id, what).status());
  return enqueue();
}

std::vector<int> ProcessSets::Members(int id) const {
  if (id == 0) {
    std::vector<int> all(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }
  MutexLock lock(&mu_);
  auto it = sets_.find(id);
  return it == sets_.end() ? std::vector<int>{} : it->second.ranks;
}

bool ProcessSets::IsMember(int id) const {
  if (id == 0) return true;
  MutexLock lock(&mu_);
  auto it = sets_.find(id);
  return it != sets_.end() && std::find(it->second.ranks.begin(), it->second.ranks.end(), rank_) !=
                                  it->second.ranks.end();
}

bool ProcessSets::Known(int id) const {
  if (id == 0) return true;
  MutexLock lock(&mu_);
  return sets_.count(id) != 0;
}

void ProcessSets::Add(int id, std::vector<int> ranks) {
  MutexLock lock(&mu_);
  sets_[id].ranks = std::move(ranks);
}

void ProcessSets::Remove(int id) {
  MutexLock lock(&mu_);
  sets_.erase(id);
}

Status ProcessSets::BeginRemove(int id) {
  const std::string what = "remove_process_set(" + std::to_string(id) + ")";
  if (id == 0) return InvalidArgument(what + ": the global process set cannot be removed");
  MutexLock lock(&mu_);
  auto it = sets_.find(id);
  if (it == sets_.end()) {
    return InvalidArgument(what + " on rank " + std::to_string(rank_) + ": process set " +
                           std::to_string(id) + " is unknown (never added, or removed)");
  }
  if (it->second.removing) {
    return FailedPrecondition(what + " on rank " + std::to_string(rank_) +
                              ": its removal is already in flight");
  }
  it->second.removing = true;
  return Status::Ok();
}

void ProcessSets::EndRemove(int id) {
  MutexLock lock(&mu_);
  auto it = sets_.find(id);
  if (it != sets_.end()) it->second.removing = false;
}

int CurrentProcessSet() {
  return current_process_set;
}

namespace internal {
int SetCurrentProcessSet(int id) {
  const int previous = current_process_set;
  current_process_set = id;
  return previous;
}
}  // namespace internal

}  // namespace kolo
