#include "tests/support/sim_gpu/sim_collectives.h"

#include <cstdio>
#include <unordered_map>

#include "ops/gpu/collective_error.h"
#include "tests/support/sim_gpu/sim_comm.h"

namespace kolo::gpu::sim {
namespace {

// Send/Recv collected between GroupStart and GroupEnd.
struct PendingP2p {
  std::shared_ptr<SimCollectives::Comm> comm;
  StreamHandle stream;
  SimCollectives::Plan::P2p p2p;
};
struct Group {
  int depth = 0;
  std::vector<PendingP2p> pending;
};

// The open group of each (host thread, SimCollectives), as NCCL's groups are per thread.
thread_local std::unordered_map<const void*, Group> tls_groups;

std::string Hex(const void* ptr) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", ptr);
  return text;
}

}  // namespace

SimCollectives::SimCollectives(SimDevice* device) : SimCollectives(device, Options{}) {}

SimCollectives::SimCollectives(SimDevice* device, const Options& options)
    : device_(device), options_(options) {}

SimCollectives::~SimCollectives() {
  std::map<Comm*, std::shared_ptr<Comm>> comms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    comms.swap(comms_);
  }
  for (auto& [raw, comm] : comms) {
    comm->Abort();  // a comm nobody destroyed: its peers must not wait for it
    comm->WaitIdle(Clock::now() + options_.op_timeout);
    if (comm->bootstrap.joinable()) comm->bootstrap.join();
  }
  tls_groups.erase(this);
}

std::shared_ptr<SimCollectives::Comm> SimCollectives::CommOf(CommHandle handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = comms_.find(reinterpret_cast<Comm*>(handle));
  return it == comms_.end() ? nullptr : it->second;
}

StatusOr<UniqueId> SimCollectives::NewUniqueId() {
  return NewSimId();
}

StatusOr<CommHandle> SimCollectives::InitComm(int size, int rank, const UniqueId& id, int device) {
  const std::string name = SimIdName(id);
  if (size < 1 || rank < 0 || rank >= size || name.empty()) {
    return NcclError("ncclCommInitRank", kNcclInvalidArgument,
                     "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                         (name.empty() ? " with an id that NewUniqueId did not make" : ""));
  }
  StatusOr<int> devices = device_->DeviceCount();
  if (!devices.ok()) {
    return NcclError("ncclCommInitRank", kNcclUnhandledCudaError, devices.status().message());
  }
  if (device < 0 || device >= *devices) {
    return NcclError("ncclCommInitRank", kNcclInvalidArgument,
                     "cuda:" + std::to_string(device) + " does not exist");
  }
  auto comm = std::make_shared<Comm>(name, size, rank, device, device_, options_);
  comm->bootstrap = std::thread([c = comm.get()] { c->Bootstrap(); });
  std::lock_guard<std::mutex> lock(mu_);
  comms_[comm.get()] = comm;
  return reinterpret_cast<CommHandle>(comm.get());
}

StatusOr<CommState> SimCollectives::PollComm(CommHandle handle) {
  std::shared_ptr<Comm> comm = CommOf(handle);
  if (comm == nullptr) {
    return NcclError("ncclCommGetAsyncError", kNcclInvalidArgument, "not a communicator");
  }
  std::lock_guard<std::mutex> lock(comm->mu);
  if (!comm->error.ok()) return comm->error;
  return comm->ready ? CommState::kReady : CommState::kInProgress;
}

Status SimCollectives::CheckBuffer(const char* call, const char* what, const void* ptr,
                                   size_t bytes, const Comm& comm) const {
  if (bytes == 0) return Status::Ok();
  int on = -1;
  if (device_->Shadow(ptr, bytes, &on) == nullptr || on != comm.device) {
    return NcclError(call, kNcclInvalidArgument,
                     std::string(what) + " " + Hex(ptr) + " (" + std::to_string(bytes) +
                         " bytes) is not device memory of cuda:" + std::to_string(comm.device));
  }
  return Status::Ok();
}

Status SimCollectives::Launch(const char* call, Plan plan, const std::shared_ptr<Comm>& comm,
                              StreamHandle stream) {
  if (comm == nullptr) return NcclError(call, kNcclInvalidArgument, "not a communicator");
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (!comm->error.ok()) return comm->error;
    if (!comm->ready) {
      return NcclError(call, kNcclInvalidUsage,
                       "the communicator is still initialising (poll it until it is ready)");
    }
  }
  if (!IsValidDataType(static_cast<int32_t>(plan.dtype)) ||
      !IsValidReduceOp(static_cast<int32_t>(plan.op))) {
    return NcclError(call, kNcclInvalidArgument, "unknown data type or reduce op");
  }
  if (plan.prescale != 1.0 && (!IsFloatingPoint(plan.dtype) ||
                               (plan.op != ReduceOp::kSum && plan.op != ReduceOp::kAverage))) {
    return NcclError(call, kNcclInvalidArgument,
                     "a prescale of " + std::to_string(plan.prescale) + " needs a floating " +
                         "type and sum or average, not " + DataTypeName(plan.dtype) + " " +
                         ReduceOpName(plan.op));
  }
  const size_t esize = DataTypeSize(plan.dtype);
  const auto size = static_cast<size_t>(comm->size);
  size_t send_elements = plan.count, recv_elements = plan.count;
  switch (plan.kind) {
    case OpKind::kAllGather:
      recv_elements *= size;
      break;
    case OpKind::kReduceScatter:
      send_elements *= size;
      break;
    case OpKind::kBroadcast:
      if (plan.root < 0 || plan.root >= comm->size) {
        return NcclError(call, kNcclInvalidArgument,
                         "root " + std::to_string(plan.root) + " is not a rank");
      }
      if (comm->rank != plan.root) send_elements = 0;
      break;
    default:
      break;
  }
  if (plan.kind != OpKind::kSendRecv) {
    KOLO_RETURN_IF_ERROR(CheckBuffer(call, "sendbuff", plan.send, send_elements * esize, *comm));
    KOLO_RETURN_IF_ERROR(CheckBuffer(call, "recvbuff", plan.recv, recv_elements * esize, *comm));
  }
  comm->OpEnqueued();
  // Held by the stream's operation: the comm outlives it, and Destroy sees it finish.
  auto token = std::shared_ptr<Comm>(comm.get(), [comm](Comm* c) { c->OpDone(); });
  Status enqueued = device_->Enqueue(
      stream, [token, plan = std::move(plan)]() -> Status { return token->Run(plan); });
  if (!enqueued.ok()) return NcclError(call, kNcclUnhandledCudaError, enqueued.message());
  return Status::Ok();
}

Status SimCollectives::AllReduce(const void* send, void* recv, size_t count, DataType dtype,
                                 ReduceOp op, double prescale, CommHandle comm,
                                 StreamHandle stream) {
  Plan plan;
  plan.kind = OpKind::kAllReduce;
  plan.send = send;
  plan.recv = recv;
  plan.count = count;
  plan.dtype = dtype;
  plan.op = op;
  plan.prescale = prescale;
  return Launch("ncclAllReduce", std::move(plan), CommOf(comm), stream);
}

Status SimCollectives::Broadcast(const void* send, void* recv, size_t count, DataType dtype,
                                 int root, CommHandle comm, StreamHandle stream) {
  Plan plan;
  plan.kind = OpKind::kBroadcast;
  plan.send = send;
  plan.recv = recv;
  plan.count = count;
  plan.dtype = dtype;
  plan.root = root;
  return Launch("ncclBroadcast", std::move(plan), CommOf(comm), stream);
}

Status SimCollectives::AllGather(const void* send, void* recv, size_t count, DataType dtype,
                                 CommHandle comm, StreamHandle stream) {
  Plan plan;
  plan.kind = OpKind::kAllGather;
  plan.send = send;
  plan.recv = recv;
  plan.count = count;
  plan.dtype = dtype;
  return Launch("ncclAllGather", std::move(plan), CommOf(comm), stream);
}

Status SimCollectives::ReduceScatter(const void* send, void* recv, size_t recv_count,
                                     DataType dtype, ReduceOp op, double prescale, CommHandle comm,
                                     StreamHandle stream) {
  Plan plan;
  plan.kind = OpKind::kReduceScatter;
  plan.send = send;
  plan.recv = recv;
  plan.count = recv_count;
  plan.dtype = dtype;
  plan.op = op;
  plan.prescale = prescale;
  return Launch("ncclReduceScatter", std::move(plan), CommOf(comm), stream);
}

Status SimCollectives::GroupStart() {
  ++tls_groups[this].depth;
  return Status::Ok();
}

Status SimCollectives::GroupEnd() {
  Group& group = tls_groups[this];
  if (group.depth == 0) {
    return NcclError("ncclGroupEnd", kNcclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  }
  if (--group.depth > 0) return Status::Ok();
  std::vector<PendingP2p> pending;
  pending.swap(group.pending);
  // One operation per comm, holding its Send/Recv in call order.
  Status first;
  while (!pending.empty()) {
    const std::shared_ptr<Comm> comm = pending.front().comm;
    const StreamHandle stream = pending.front().stream;
    Plan plan;
    plan.kind = OpKind::kSendRecv;
    std::vector<PendingP2p> rest;
    for (PendingP2p& p : pending) {
      if (p.comm != comm) {
        rest.push_back(std::move(p));
      } else if (p.stream != stream && first.ok()) {
        first = NcclError("ncclGroupEnd", kNcclInvalidUsage,
                          "the simulator needs one stream per communicator in a group");
      } else {
        plan.p2p.push_back(p.p2p);
      }
    }
    pending.swap(rest);
    Status launched = Launch("ncclGroupEnd", std::move(plan), comm, stream);
    if (first.ok()) first = launched;
  }
  return first;
}

Status SimCollectives::P2p(bool send, void* buf, size_t count, DataType dtype, int peer,
                           CommHandle handle, StreamHandle stream) {
  const char* call = send ? "ncclSend" : "ncclRecv";
  std::shared_ptr<Comm> comm = CommOf(handle);
  if (comm == nullptr) return NcclError(call, kNcclInvalidArgument, "not a communicator");
  if (!IsValidDataType(static_cast<int32_t>(dtype))) {
    return NcclError(call, kNcclInvalidArgument, "unknown data type");
  }
  if (peer < 0 || peer >= comm->size) {
    return NcclError(call, kNcclInvalidArgument, "peer " + std::to_string(peer) + " is not a rank");
  }
  const size_t bytes = count * DataTypeSize(dtype);
  KOLO_RETURN_IF_ERROR(CheckBuffer(call, send ? "sendbuff" : "recvbuff", buf, bytes, *comm));
  // Outside a group a Send or Recv is a group of its own, as in NCCL.
  KOLO_RETURN_IF_ERROR(GroupStart());
  tls_groups[this].pending.push_back(PendingP2p{comm, stream, Plan::P2p{send, buf, bytes, peer}});
  return GroupEnd();
}

Status SimCollectives::Send(const void* send, size_t count, DataType dtype, int peer,
                            CommHandle comm, StreamHandle stream) {
  return P2p(true, const_cast<void*>(send), count, dtype, peer, comm, stream);
}

Status SimCollectives::Recv(void* recv, size_t count, DataType dtype, int peer, CommHandle comm,
                            StreamHandle stream) {
  return P2p(false, recv, count, dtype, peer, comm, stream);
}

Status SimCollectives::Abort(CommHandle handle) {
  std::shared_ptr<Comm> comm = CommOf(handle);
  if (comm == nullptr)
    return NcclError("ncclCommAbort", kNcclInvalidArgument, "not a communicator");
  comm->Abort();
  return Status::Ok();
}

Status SimCollectives::Destroy(CommHandle handle) {
  std::shared_ptr<Comm> comm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = comms_.find(reinterpret_cast<Comm*>(handle));
    if (it == comms_.end()) {
      return NcclError("ncclCommDestroy", kNcclInvalidArgument, "not a communicator");
    }
    comm = std::move(it->second);
    comms_.erase(it);
  }
  Status result;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (!comm->ready && comm->error.ok()) {
      result = NcclError("ncclCommDestroy", kNcclInvalidUsage,
                         "destroyed while initialising: aborted it");
    }
  }
  if (!result.ok()) comm->Abort();
  if (!comm->WaitIdle(Clock::now() + options_.op_timeout)) {
    result = NcclError("ncclCommDestroy", kNcclSystemError,
                       "its ops did not finish in " + std::to_string(options_.op_timeout.count()) +
                           " ms: aborted it");
    comm->Abort();
    // Aborted ops end at once; one still queued behind other work holds the comm alive.
    comm->WaitIdle(Clock::now() + options_.op_timeout);
  }
  if (comm->bootstrap.joinable()) comm->bootstrap.join();
  return result;
}

}  // namespace kolo::gpu::sim
