// Coalescing for kolo's torch.distributed backend: torch's _coalescing_manager(group, device)
// calls the backend's startCoalescing, issues ops (point-to-point ops, or a coalesced
// collective), then endCoalescing, whose one Work stands for all of them. kolo has nothing to
// fuse across those ops (each is already in flight when issued), so a Coalescer only collects
// their works, and a CoalescedWork completes once each of them has. batch_isend_irecv does not
// come here: torch coalesces only for backends whose supports_coalescing is true, and kolo's,
// like gloo's, is false, so a batch returns one Work per op as on gloo.
//
// Threading: Coalescer's methods may be called from any thread (one lock). CoalescedWork's
// methods too; its members complete on kolo's threads.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace kolo::torch_ext {

class CoalescedWork : public c10d::Work {
 public:
  CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works);

  bool isCompleted() override;
  bool isSuccess() const override;
  // The first failed member's error (in issue order); null while none failed.
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // Waits for each member in issue order, all within `timeout` (each member's own otherwise);
  // throws the first member's error.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // Completes once every member's future has: every member's outputs, or the first error.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  const std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::vector<at::Tensor> outputs_;  // constant after construction
  std::mutex future_mu_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // guarded by future_mu_
};

class Coalescer {
 public:
  // Throws when a block is already open (torch opens one at a time per group).
  void Start(const std::string& group_name);
  // The ops' work since Start (a completed one without ops); throws without Start.
  c10::intrusive_ptr<c10d::Work> End(int rank, const std::string& group_name);
  // Counts `work` in the open block, if any.
  void Add(const c10::intrusive_ptr<c10d::Work>& work);

 private:
  std::mutex mu_;
  bool open_ = false;                                  // guarded by mu_
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;  // guarded by mu_
};

}  // namespace kolo::torch_ext
