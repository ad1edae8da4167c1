#include "python/csrc/c10d/coalesced_work.h"

#include <torch/extension.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <utility>

namespace kolo::torch_ext {
namespace {

c10::SourceLocation Here(const char* function) {
  return c10::SourceLocation{function, __FILE__, static_cast<uint32_t>(__LINE__)};
}

// What the members' futures have brought so far, until the last one completes the total.
struct Gathering {
  explicit Gathering(size_t count) : left(count) {}
  std::atomic<size_t> left;
  std::mutex mu;
  std::exception_ptr first_error;  // guarded by mu (set by the member issued first)
  size_t first_error_index = 0;    // guarded by mu
};

}  // namespace

CoalescedWork::CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works)
    : c10d::Work(rank, c10d::OpType::COALESCED, "kolo:coalesced"), works_(std::move(works)) {
  for (const auto& work : works_) {
    for (const at::Tensor& tensor : work->result()) outputs_.push_back(tensor);
  }
}

bool CoalescedWork::isCompleted() {
  for (const auto& work : works_) {
    if (!work->isCompleted()) return false;
  }
  return true;
}

bool CoalescedWork::isSuccess() const {
  for (const auto& work : works_) {
    if (!work->isCompleted() || !work->isSuccess()) return false;
  }
  return true;
}

std::exception_ptr CoalescedWork::exception() const {
  for (const auto& work : works_) {
    if (work->isCompleted() && !work->isSuccess()) return work->exception();
  }
  return nullptr;
}

std::vector<at::Tensor> CoalescedWork::result() {
  return outputs_;
}

bool CoalescedWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    for (const auto& work : works_) work->wait();
    return true;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& work : works_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    // A member past the deadline still gets a minimal wait, which raises its timeout error.
    work->wait(std::max(left, std::chrono::milliseconds(1)));
  }
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> CoalescedWork::getFuture() {
  std::lock_guard<std::mutex> lock(future_mu_);
  if (future_) return future_;
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  if (works_.empty()) {
    future_->markCompleted(c10::IValue(outputs_));
    return future_;
  }
  auto gathering = std::make_shared<Gathering>(works_.size());
  const c10::intrusive_ptr<c10::ivalue::Future> total = future_;
  const std::vector<at::Tensor> outputs = outputs_;
  for (size_t i = 0; i < works_.size(); ++i) {
    works_[i]->getFuture()->addCallback(
        [gathering, total, outputs, i](c10::ivalue::Future& member) {
          if (member.hasError()) {
            std::lock_guard<std::mutex> lock(gathering->mu);
            if (!gathering->first_error || i < gathering->first_error_index) {
              gathering->first_error = member.exception_ptr();
              gathering->first_error_index = i;
            }
          }
          if (gathering->left.fetch_sub(1) != 1) return;
          std::exception_ptr error;
          {
            std::lock_guard<std::mutex> lock(gathering->mu);
            error = gathering->first_error;
          }
          if (error) {
            total->setError(error);
          } else {
            total->markCompleted(c10::IValue(outputs));
          }
        });
  }
  return future_;
}

void Coalescer::Start(const std::string& group_name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) {
    throw c10::Error(Here(__func__), "kolo: startCoalescing on process group '" + group_name +
                                         "', which is already coalescing (no endCoalescing "
                                         "since the last startCoalescing)");
  }
  open_ = true;
  works_.clear();
}

c10::intrusive_ptr<c10d::Work> Coalescer::End(int rank, const std::string& group_name) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) {
      throw c10::Error(Here(__func__), "kolo: endCoalescing on process group '" + group_name +
                                           "' without startCoalescing");
    }
    open_ = false;
    works.swap(works_);
  }
  return c10::make_intrusive<CoalescedWork>(rank, std::move(works));
}

void Coalescer::Add(const c10::intrusive_ptr<c10d::Work>& work) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) works_.push_back(work);
}

}  // namespace kolo::torch_ext
