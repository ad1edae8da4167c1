// SimCollectives: simulated NCCL behind kolo's CollectiveApi, over a SimDevice (test support
// only; never linked into libkolo). Its collectives really reduce across ranks:
// - Ranks are SimCollectives instances in threads of one process or in separate processes;
//   they meet through the id, which names an abstract Unix socket that rank 0's InitComm
//   listens on (as NCCL's bootstrap does; sim_star_link.h). InitComm returns at once and a
//   bootstrap thread per comm joins the ranks; PollComm says in progress until all joined.
// - Each op is one operation on the stream (SimDevice::Enqueue): every rank sends its bytes
//   (prescaled) to rank 0, which reduces in rank order with kolo's kernels and sends each
//   rank its result (sim_collective_ops.h). Errors of an op fail the stream (its events) and
//   the comm (PollComm), NCCL's async error; later ops on a failed comm fail with that error.
// - Faults (Options): an async error, a hang until Abort, or a vanishing rank, from the
//   (k+1)-th op on; InitComm in progress for a while. Every wait has a deadline.
//
// Threading: thread-safe as CollectiveApi says. GroupStart/GroupEnd nest per (host thread,
// SimCollectives). The SimDevice must outlive this object; destroying it aborts and frees the
// comms still alive.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "ops/gpu/collective_api.h"
#include "tests/support/sim_gpu/sim_device.h"

namespace kolo::gpu::sim {

class SimCollectives final : public CollectiveApi {
 public:
  enum class Fault {
    kNone,
    kAsyncError,  // the op fails on this rank with ncclRemoteError; the peers fail naming it
    kHang,        // the op blocks until Abort (or the op deadline), then fails
    kVanish,      // this rank drops its connections: the peers fail naming it
  };
  struct Options {
    std::chrono::milliseconds init_timeout{30000};  // every rank joined by then
    std::chrono::milliseconds op_timeout{60000};    // each op's waits, and Destroy's
    std::chrono::milliseconds init_delay{0};        // PollComm in progress at least this long
    Fault fault = Fault::kNone;
    int fault_after_ops = 0;  // the fault hits every op after this many on a comm
  };

  explicit SimCollectives(SimDevice* device);
  SimCollectives(SimDevice* device, const Options& options);
  ~SimCollectives() override;
  SimCollectives(const SimCollectives&) = delete;
  SimCollectives& operator=(const SimCollectives&) = delete;

  std::string name() const override { return "nccl-sim"; }
  StatusOr<int> Version() override { return 22809; }  // the NCCL it imitates
  StatusOr<UniqueId> NewUniqueId() override;
  StatusOr<CommHandle> InitComm(int size, int rank, const UniqueId& id, int device) override;
  StatusOr<CommState> PollComm(CommHandle comm) override;
  Status AllReduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                   double prescale, CommHandle comm, StreamHandle stream) override;
  Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                   CommHandle comm, StreamHandle stream) override;
  Status AllGather(const void* send, void* recv, size_t count, DataType dtype, CommHandle comm,
                   StreamHandle stream) override;
  Status ReduceScatter(const void* send, void* recv, size_t recv_count, DataType dtype, ReduceOp op,
                       double prescale, CommHandle comm, StreamHandle stream) override;
  Status GroupStart() override;
  Status GroupEnd() override;
  Status Send(const void* send, size_t count, DataType dtype, int peer, CommHandle comm,
              StreamHandle stream) override;
  Status Recv(void* recv, size_t count, DataType dtype, int peer, CommHandle comm,
              StreamHandle stream) override;
  Status Abort(CommHandle comm) override;
  Status Destroy(CommHandle comm) override;

  struct Comm;  // public for the op runner in sim_collectives.cc
  struct Plan;

 private:
  std::shared_ptr<Comm> CommOf(CommHandle handle) const;
  // Checks what NCCL checks at enqueue, then enqueues `plan` on `stream`.
  Status Launch(const char* call, Plan plan, const std::shared_ptr<Comm>& comm,
                StreamHandle stream);
  Status CheckBuffer(const char* call, const char* what, const void* ptr, size_t bytes,
                     const Comm& comm) const;
  Status P2p(bool send, void* buf, size_t count, DataType dtype, int peer, CommHandle comm,
             StreamHandle stream);

  SimDevice* const device_;
  const Options options_;

  mutable std::mutex mu_;
  std::map<Comm*, std::shared_ptr<Comm>> comms_;  // guarded by mu_
};

}  // namespace kolo::gpu::sim
