#include "core/loop/op_completer.h"

#include <algorithm>
#include <exception>

namespace kolo {

void OpCompleter::Complete(std::unique_ptr<TensorEntry> entry, const Status& status,
                           const Response* response) const {
  if (entry == nullptr) return;
  // The clock is read for a traced op only (the op's path is a few thousand cycles; each
  // read ~55).
  const bool traced = tracer_ != nullptr && OpTracer::Opened(*entry);
  const Clock::TimePoint callback_start = traced ? clock_->Now() : Clock::TimePoint();
  if (entry->callback) {
    try {
      entry->callback(status);
    } catch (const std::exception& e) {
      logger_->error("callback of '{}' threw: {}", entry->meta.name, e.what());
    } catch (...) {
      logger_->error("callback of '{}' threw an unknown exception", entry->meta.name);
    }
  }
  if (traced) {
    tracer_->Completed(*entry, status, response, callback_start, clock_->Now());
  }
  if (queue_ != nullptr) queue_->Recycle(std::move(entry));  // the next op's, unallocated
}

void OpCompleter::CompleteResponse(const Response& response, const Status& status,
                                   const std::vector<std::string>& skip) const {
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

void OpCompleter::FailQueued(const Status& why) const {
  for (auto& entry : queue_->RemoveAll()) Complete(std::move(entry), why);
}

}  // namespace kolo
