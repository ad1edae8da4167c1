// NcclCollectiveApi: CollectiveApi over NCCL, one NCCL call per method where NCCL has one; the
// simulator (tests/support/sim_gpu/sim_collectives.h) stands in for it in tests. Comms are
// non-blocking (blocking = 0): a call NCCL answers with ncclInProgress is polled until it settles,
// up to NcclOptions::call_timeout (then DeadlineExceeded, and the caller aborts the comm).
// Errors go through CollectiveError. Built where KOLO_HAVE_NCCL; made by NewNcclCollectiveApi.
// Threading: as CollectiveApi says: any thread, but the caller serialises all calls on one comm
// (Abort and Destroy too); groups nest per host thread; InitComm sets the thread's CUDA device.
#pragma once

#include <memory>
#include <string>

#include "ops/gpu/collective_api.h"
#include "ops/nccl/nccl_backend.h"

namespace kolo::gpu {

class NcclCollectiveApi final : public CollectiveApi {
 public:
  // Fails (FailedPrecondition) when the libnccl loaded is older than NCCL_VERSION_CODE.
  static StatusOr<std::unique_ptr<NcclCollectiveApi>> Create(const NcclOptions& options);
  // NCCL_VERSION_CODE of the nccl.h kolo was compiled against.
  static int BuiltVersion();

  // Communicators not destroyed by then are leaked, not aborted: NCCL may already be gone at
  // process exit, and a comm is the caller's to destroy.
  ~NcclCollectiveApi() override = default;

  std::string name() const override { return "nccl"; }
  StatusOr<int> Version() override;
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
  // ncclCommAbort frees NCCL's comm at once; the handle remembers the abort, so a second Abort
  // does nothing, PollComm returns the abort's error and Destroy only frees the handle.
  Status Abort(CommHandle comm) override;
  // ncclCommFinalize, polled up to NcclOptions::destroy_timeout, then ncclCommDestroy. A comm
  // still initialising, failed, or past the deadline is aborted instead (and a deadline says so).
  Status Destroy(CommHandle comm) override;

  struct Comm;  // the handle's target, defined in the .cc (it holds the ncclComm_t)

 private:
  explicit NcclCollectiveApi(const NcclOptions& options) : options_(options) {}

  const NcclOptions options_;  // constant after construction
};

}  // namespace kolo::gpu
