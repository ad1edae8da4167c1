// The state of one simulated communicator and what runs on its behalf: the bootstrap thread
// that joins the ranks, and the op runner that a stream operation calls (both used only by
// SimCollectives, sim_collectives.h). An op holds the comm by shared_ptr, so that a comm
// destroyed with ops still queued stays alive until they ran.
//
// Threading: the bootstrap thread, the streams running ops, and SimCollectives' callers share
// a Comm; its fields say who may touch them.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/support/sim_gpu/sim_collective_ops.h"
#include "tests/support/sim_gpu/sim_collectives.h"
#include "tests/support/sim_gpu/sim_star_link.h"

namespace kolo::gpu::sim {

// One op as enqueued: what to read and where to write (device pointers, translated to their
// shadows when the op runs).
struct SimCollectives::Plan {
  struct P2p {
    bool send = false;
    void* buf = nullptr;
    size_t bytes = 0;
    int peer = 0;
  };
  OpKind kind = OpKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  int root = 0;
  std::vector<P2p> p2p;  // kSendRecv, in call order
};

struct SimCollectives::Comm {
  Comm(std::string name, int size, int rank, int device, SimDevice* sim_device,
       const Options& options);

  // Constant after construction.
  const int size;
  const int rank;
  const int device;
  SimDevice* const sim_device;
  const Options options;
  StarLink link;  // thread-safe as it says

  // Records the comm's first error (later ones are consequences) and wakes every wait.
  void Fail(const Status& error);
  Status FirstError();
  // Fails the comm and its ops, now and later, and wakes them; idempotent.
  void Abort();
  // The bootstrap thread's body: waits init_delay, then joins the ranks.
  void Bootstrap();
  // Runs one op on the calling stream's thread; its status is the stream's.
  Status Run(const Plan& plan);
  void OpEnqueued();
  void OpDone();
  // Waits until no op is queued or running, or the deadline; true if none is.
  bool WaitIdle(Clock::time_point deadline);

  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;     // guarded by mu
  bool aborted = false;   // guarded by mu
  Status error;           // guarded by mu: the first error
  int pending = 0;        // guarded by mu: ops enqueued and not finished
  std::thread bootstrap;  // started by InitComm, joined by Destroy

 private:
  StatusOr<Contribution> Contribute(const Plan& plan, uint64_t seq) const;
  Status Deliver(const Plan& plan, const Reply& reply) const;
  // Rank 0: gathers, combines and answers; the others: send and wait for the answer.
  StatusOr<Reply> Exchange(const Contribution& mine, Clock::time_point deadline);
  // The (seq+1)-th op under the configured fault: the status it fails with.
  Status InjectFault(const char* call, uint64_t seq, Clock::time_point deadline);

  std::mutex op_mu_;      // serialises ops, so that they keep their order on every rank
  uint64_t ops_run_ = 0;  // guarded by op_mu_
};

// An NCCL error as the real library reports it: NCCL's own text for `code`, `last_error` as
// ncclGetLastError's string.
Status NcclError(const char* call, int code, const std::string& last_error);
// What a StarLink failure means in NCCL's terms, as `call` reports it.
Status LinkError(const char* call, const Status& link_status);

}  // namespace kolo::gpu::sim
