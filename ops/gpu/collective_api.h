// CollectiveApi: the seam between kolo's GPU path and a collective library (NCCL), the twin of
// DeviceApi (device_api.h). The executor and completion thread talk to NCCL only through it,
// so they are tested against a simulator (tests/support/sim_gpu/sim_collectives.h) whose
// collectives really reduce across ranks. No NCCL type appears here.
//
// Threading: methods may be called from any thread, but one communicator is not thread-safe
// (as in NCCL): the caller serialises the calls on one comm. GroupStart/GroupEnd nest per host
// thread. Collectives only enqueue on the stream and return; a failure of the enqueued work
// (a peer lost, an injected fault, an abort) surfaces later at PollComm and at the stream's
// events (DeviceApi::QueryEvent), NCCL's "async error".
//
// Errors: a Status whose message names the NCCL call, NCCL's result name, code and text, and
// NCCL's last-error string (collective_error.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/status.h"
#include "kolo/types.h"
#include "ops/gpu/device_api.h"

namespace kolo::gpu {

// Opaque: a backend casts its own communicator to and from this.
using CommHandle = struct CommTag*;

// ncclUniqueId: 128 opaque bytes made by one rank and handed to every rank of the job.
using UniqueId = std::array<uint8_t, 128>;

enum class CommState { kReady, kInProgress };

class CollectiveApi {
 public:
  virtual ~CollectiveApi() = default;

  // "nccl" or "nccl-sim" (for messages and the timeline).
  virtual std::string name() const = 0;
  // The library's version as NCCL encodes it (22809 for 2.28.9).
  virtual StatusOr<int> Version() = 0;

  // A fresh id for one communicator. The real one starts a bootstrap thread and opens a
  // listening socket that live on, so call it only when a communicator is really needed,
  // on one rank, and send the id to the others.
  virtual StatusOr<UniqueId> NewUniqueId() = 0;

  // Starts joining rank `rank` of `size` to the communicator of `id`, on `device`; does not
  // wait for the other ranks (NCCL's non-blocking config). The handle is valid at once; poll
  // PollComm until it is ready, and Abort it when a deadline passes.
  virtual StatusOr<CommHandle> InitComm(int size, int rank, const UniqueId& id, int device) = 0;
  // kReady once every rank joined; kInProgress while the bootstrap runs; the comm's first
  // error (of the init, or of any enqueued op since) otherwise. Never blocks.
  virtual StatusOr<CommState> PollComm(CommHandle comm) = 0;

  // recv[i] = op over ranks of (prescale * send[i]), for `count` elements of `dtype` in device
  // memory; in place when send == recv. kAverage divides the sum by the comm's size (ncclAvg;
  // integers truncate toward zero). prescale != 1 (ncclRedOpCreatePreMulSum) is for floating
  // dtypes with kSum or kAverage only; anything else fails here with InvalidArgument.
  virtual Status AllReduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                           double prescale, CommHandle comm, StreamHandle stream) = 0;
  // recv = root's send on every rank; in place when send == recv (send is read on root only).
  virtual Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                           CommHandle comm, StreamHandle stream) = 0;
  // recv (size * count elements) = every rank's send (count elements) in rank order.
  virtual Status AllGather(const void* send, void* recv, size_t count, DataType dtype,
                           CommHandle comm, StreamHandle stream) = 0;
  // The AllReduce of send (size * recv_count elements), of which rank r keeps block r in recv.
  virtual Status ReduceScatter(const void* send, void* recv, size_t recv_count, DataType dtype,
                               ReduceOp op, double prescale, CommHandle comm,
                               StreamHandle stream) = 0;

  // Send and Recv between GroupStart and GroupEnd run as one operation (alltoall: every rank
  // sends to and receives from every rank); the k-th Recv from a peer gets that peer's k-th
  // Send to this rank, of the same size. Buffers must stay valid until the stream ran it.
  virtual Status GroupStart() = 0;
  virtual Status GroupEnd() = 0;
  virtual Status Send(const void* send, size_t count, DataType dtype, int peer, CommHandle comm,
                      StreamHandle stream) = 0;
  virtual Status Recv(void* recv, size_t count, DataType dtype, int peer, CommHandle comm,
                      StreamHandle stream) = 0;

  // Fails every op of `comm` still queued or running (a hang on a dead peer included) and
  // closes its connections; the peers then fail too. Idempotent. The handle stays valid for
  // PollComm (the abort's error) and must still be destroyed.
  virtual Status Abort(CommHandle comm) = 0;
  // Waits (up to the backend's deadline) for the ops enqueued on `comm`, then frees it; the
  // handle is invalid afterwards. Past the deadline it aborts the comm and says so.
  virtual Status Destroy(CommHandle comm) = 0;
};

}  // namespace kolo::gpu
