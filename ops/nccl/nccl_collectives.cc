#include "ops/nccl/nccl_collectives.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "ops/gpu/collective_error.h"
#include "ops/gpu/device_error.h"
#include "ops/nccl/nccl_version.h"

#if NCCL_VERSION_CODE < 21400
#error "kolo's NCCL backend needs NCCL 2.14 or newer (non-blocking communicators, ncclCommFinalize)"
#endif

namespace kolo::gpu {

// What a CommHandle points at. NCCL frees its comm in ncclCommAbort, so the abort is
// remembered here rather than by NCCL. Touched only by calls on this comm, which the caller
// serialises.
struct NcclCollectiveApi::Comm {
  ncclComm_t comm = nullptr;  // null once aborted
  int size = 0;
  bool ready = false;  // PollComm saw the init finish
  Status abort_error;  // set by Abort: what PollComm and later calls return
  std::string where;   // "rank 0 of 2 on cuda:0", for messages
};

namespace {

static_assert(sizeof(ncclUniqueId) == std::tuple_size<UniqueId>::value,
              "UniqueId must hold an ncclUniqueId");

using Comm = NcclCollectiveApi::Comm;

// NCCL's groups are per host thread; so is this record of the comms used inside the open one,
// which GroupEnd polls when NCCL answers ncclInProgress.
thread_local int tls_group_depth = 0;
thread_local std::vector<Comm*> tls_group_comms;

Comm* CommOf(CommHandle handle) {
  return reinterpret_cast<Comm*>(handle);
}

cudaStream_t Raw(StreamHandle stream) {
  return reinterpret_cast<cudaStream_t>(stream);
}

Status Error(const std::string& call, ncclResult_t result, ncclComm_t comm) {
  return CollectiveError(call, static_cast<int>(result), ncclGetErrorString(result),
                         ncclGetLastError(comm));
}

StatusOr<ncclDataType_t> NcclType(const char* call, DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kUInt16:  // NCCL has no 16-bit integers and no bool (NcclHasDataType)
    case DataType::kInt16:
    case DataType::kBool:
      break;
  }
  return InvalidArgument(std::string(call) + ": kolo data type " + DataTypeName(dtype) +
                         " has no NCCL type");
}

StatusOr<ncclRedOp_t> NcclOp(const char* call, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
  }
  return InvalidArgument(std::string(call) + ": kolo reduce op " + ReduceOpName(op) +
                         " has no NCCL op");
}

// What the interface refuses before any NCCL call: a prescale NCCL cannot premultiply.
Status CheckPrescale(const char* call, DataType dtype, ReduceOp op, double prescale) {
  if (prescale == 1.0) return Status::Ok();
  if (IsFloatingPoint(dtype) && (op == ReduceOp::kSum || op == ReduceOp::kAverage)) {
    return Status::Ok();
  }
  return InvalidArgument(std::string(call) + ": a prescale of " + std::to_string(prescale) +
                         " needs a floating data type and sum or average "
                         "(ncclRedOpCreatePreMulSum), not " +
                         DataTypeName(dtype) + " " + ReduceOpName(op));
}

// The handle of a comm that takes collectives: not null, not aborted, initialised.
StatusOr<Comm*> Usable(const char* call, CommHandle handle) {
  Comm* c = CommOf(handle);
  if (c == nullptr) return InvalidArgument(std::string(call) + ": not a communicator (null)");
  if (!c->abort_error.ok()) return c->abort_error;
  if (!c->ready) {
    return CollectiveError(std::string(call) + " (" + c->where + ")", kNcclInvalidUsage,
                           "the communicator is still initialising (poll it until it is ready)",
                           "");
  }
  return c;
}

// NCCL's rule for non-blocking comms: a call that returns ncclInProgress has not finished (an
// op not yet enqueued, a finalize still flushing), and the comm takes no other call until
// ncclCommGetAsyncError says it is no longer in progress. There is nothing to wait on but that
// state, so this polls it: yielding first, then sleeping a little longer each time, up to 1 ms.
Status Settle(const std::string& call, ncclResult_t result, Comm& c, const Clock& clock,
              Clock::TimePoint deadline, std::chrono::milliseconds timeout) {
  if (result == ncclSuccess) return Status::Ok();
  if (result != ncclInProgress) return Error(call, result, c.comm);
  std::chrono::microseconds pause{0};
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t polled = ncclCommGetAsyncError(c.comm, &state);
    if (polled != ncclSuccess) return Error(call + ": ncclCommGetAsyncError", polled, c.comm);
    if (state == ncclSuccess) return Status::Ok();
    if (state != ncclInProgress) return Error(call, state, c.comm);
    if (clock.Now() >= deadline) {
      return DeadlineExceeded(call + ": still ncclInProgress after " +
                              std::to_string(timeout.count()) + " ms");
    }
    if (pause.count() == 0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
    }
    pause = std::min(pause * 2 + std::chrono::microseconds(10), std::chrono::microseconds(1000));
  }
}

Status Settle(const std::string& call, ncclResult_t result, Comm& c, const NcclOptions& options) {
  return Settle(call, result, c, *options.clock, options.clock->Now() + options.call_timeout,
                options.call_timeout);
}

// A call that enqueues on a usable comm: inside a group NCCL only records it (ncclGroupEnd
// launches, and settles, the lot); outside one it settles here.
Status Enqueued(const char* call, ncclResult_t result, Comm& c, const NcclOptions& options) {
  const std::string what = std::string(call) + " (" + c.where + ")";
  if (tls_group_depth == 0) return Settle(what, result, c, options);
  if (std::find(tls_group_comms.begin(), tls_group_comms.end(), &c) == tls_group_comms.end()) {
    tls_group_comms.push_back(&c);
  }
  if (result == ncclSuccess || result == ncclInProgress) return Status::Ok();
  return Error(what, result, c.comm);
}

// ncclRedOpCreatePreMulSum with the factor in the tensor's own type, read before the call
// returns (ncclScalarHostImmediate). NCCL has no premultiplied average, so an average
// premultiplies by prescale / size and sums: the same result.
StatusOr<ncclRedOp_t> CreatePreMulSum(ncclDataType_t type, ReduceOp op, double prescale, Comm& c,
                                      const NcclOptions& options) {
  const double factor = op == ReduceOp::kAverage ? prescale / c.size : prescale;
  alignas(8) unsigned char scalar[8];
  const auto put = [&scalar](const auto& value) { std::memcpy(scalar, &value, sizeof(value)); };
  switch (type) {
    case ncclFloat16:
      put(__double2half(factor));
      break;
    case ncclBfloat16:
      put(__double2bfloat16(factor));
      break;
    case ncclFloat32:
      put(static_cast<float>(factor));
      break;
    default:
      put(factor);  // ncclFloat64: CheckPrescale let no other type through
      break;
  }
  ncclRedOp_t red = ncclSum;
  KOLO_RETURN_IF_ERROR(Settle(
      "ncclRedOpCreatePreMulSum (" + c.where + ")",
      ncclRedOpCreatePreMulSum(&red, scalar, type, ncclScalarHostImmediate, c.comm), c, options));
  return red;
}

// NCCL allows destroying the op as soon as the call given it returned (in a group too).
Status DestroyPreMulSum(ncclRedOp_t red, Comm& c, const NcclOptions& options) {
  return Settle("ncclRedOpDestroy (" + c.where + ")", ncclRedOpDestroy(red, c.comm), c, options);
}

// The reduction of an AllReduce or ReduceScatter: a premultiplied sum (to destroy after the
// call) for a prescale, NCCL's own op otherwise.
struct Reduction {
  ncclRedOp_t op = ncclSum;
  bool premul = false;
};

StatusOr<Reduction> ReductionFor(const char* call, DataType dtype, ncclDataType_t type, ReduceOp op,
                                 double prescale, Comm& c, const NcclOptions& options) {
  Reduction r;
  if (prescale == 1.0) {
    KOLO_ASSIGN_OR_RETURN(r.op, NcclOp(call, op));
    return r;
  }
  KOLO_ASSIGN_OR_RETURN(r.op, CreatePreMulSum(type, op, prescale, c, options));
  r.premul = true;
  return r;
}

// The call's own error first; a failed ncclRedOpDestroy only when the call succeeded.
Status Reduced(const Status& enqueued, const Reduction& r, Comm& c, const NcclOptions& options) {
  const Status destroyed = r.premul ? DestroyPreMulSum(r.op, c, options) : Status::Ok();
  return enqueued.ok() ? destroyed : enqueued;
}

}  // namespace

StatusOr<std::unique_ptr<NcclCollectiveApi>> NcclCollectiveApi::Create(const NcclOptions& options) {
  int run_time = 0;
  const ncclResult_t result = ncclGetVersion(&run_time);
  if (result != ncclSuccess) return Error("ncclGetVersion", result, nullptr);
  KOLO_RETURN_IF_ERROR(CheckNcclRunTimeVersion(BuiltVersion(), run_time));
  return std::unique_ptr<NcclCollectiveApi>(new NcclCollectiveApi(options));
}

int NcclCollectiveApi::BuiltVersion() {
  return NCCL_VERSION_CODE;
}

StatusOr<int> NcclCollectiveApi::Version() {
  int version = 0;
  const ncclResult_t result = ncclGetVersion(&version);
  if (result != ncclSuccess) return Error("ncclGetVersion", result, nullptr);
  return version;
}

StatusOr<UniqueId> NcclCollectiveApi::NewUniqueId() {
  ncclUniqueId raw;
  const ncclResult_t result = ncclGetUniqueId(&raw);
  if (result != ncclSuccess) return Error("ncclGetUniqueId", result, nullptr);
  UniqueId id;
  std::memcpy(id.data(), raw.internal, id.size());
  return id;
}

StatusOr<CommHandle> NcclCollectiveApi::InitComm(int size, int rank, const UniqueId& id,
                                                 int device) {
  auto c = std::make_unique<Comm>();
  c->size = size;
  c->where = "rank " + std::to_string(rank) + " of " + std::to_string(size) +
             " on cuda:" + std::to_string(device);
  const std::string call = "ncclCommInitRankConfig (" + c->where + ")";
  if (size < 1 || rank < 0 || rank >= size || device < 0) {
    return InvalidArgument(call + ": no such rank or device");
  }
  const cudaError_t set = cudaSetDevice(device);
  if (set != cudaSuccess) {
    cudaGetLastError();  // the runtime keeps the last error; it is reported here, once
    return DeviceError("cudaSetDevice", static_cast<int>(set), cudaGetErrorName(set),
                       cudaGetErrorString(set))
        .WithContext(call);
  }
  ncclUniqueId raw;
  std::memcpy(raw.internal, id.data(), id.size());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // return at once; PollComm reports the bootstrap's progress
  const ncclResult_t result = ncclCommInitRankConfig(&c->comm, size, raw, rank, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    Status error = Error(call, result, c->comm);
    if (c->comm != nullptr) ncclCommAbort(c->comm);  // frees what the failed init made
    return error;
  }
  return reinterpret_cast<CommHandle>(c.release());
}

StatusOr<CommState> NcclCollectiveApi::PollComm(CommHandle handle) {
  Comm* c = CommOf(handle);
  if (c == nullptr) return InvalidArgument("ncclCommGetAsyncError: not a communicator (null)");
  if (!c->abort_error.ok()) return c->abort_error;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t polled = ncclCommGetAsyncError(c->comm, &state);
  if (polled != ncclSuccess) {
    return Error("ncclCommGetAsyncError (" + c->where + ")", polled, c->comm);
  }
  if (state == ncclInProgress) return CommState::kInProgress;
  if (state != ncclSuccess) {
    // Before the first kReady the error can only be the init's.
    const char* call = c->ready ? "ncclCommGetAsyncError" : "ncclCommInitRankConfig";
    return Error(std::string(call) + " (" + c->where + ")", state, c->comm);
  }
  c->ready = true;
  return CommState::kReady;
}

Status NcclCollectiveApi::AllReduce(const void* send, void* recv, size_t count, DataType dtype,
                                    ReduceOp op, double prescale, CommHandle comm,
                                    StreamHandle stream) {
  const char* call = "ncclAllReduce";
  KOLO_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(call, dtype));
  KOLO_RETURN_IF_ERROR(NcclOp(call, op).status());
  KOLO_RETURN_IF_ERROR(CheckPrescale(call, dtype, op, prescale));
  KOLO_ASSIGN_OR_RETURN(Comm * c, Usable(call, comm));
  KOLO_ASSIGN_OR_RETURN(const Reduction r,
                        ReductionFor(call, dtype, type, op, prescale, *c, options_));
  return Reduced(Enqueued(call, ncclAllReduce(send, recv, count, type, r.op, c->comm, Raw(stream)),
                          *c, options_),
                 r, *c, options_);
}

Status NcclCollectiveApi::Broadcast(const void* send, void* recv, size_t count, DataType dtype,
                                    int root, CommHandle comm, StreamHandle stream) {
  const char* call = "ncclBroadcast";
  KOLO_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(call, dtype));
  KOLO_ASSIGN_OR_RETURN(Comm * c, Usable(call, comm));
  return Enqueued(call, ncclBroadcast(send, recv, count, type, root, c->comm, Raw(stream)), *c,
                  options_);
}

Status NcclCollectiveApi::AllGather(const void* send, void* recv, size_t count, DataType dtype,
                                    CommHandle comm, StreamHandle stream) {
  const char* call = "ncclAllGather";
  KOLO_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(call, dtype));
  KOLO_ASSIGN_OR_RETURN(Comm * c, Usable(call, comm));
  return Enqueued(call, ncclAllGather(send, recv, count, type, c->comm, Raw(stream)), *c, options_);
}

Status NcclCollectiveApi::ReduceScatter(const void* send, void* recv, size_t recv_count,
                                        DataType dtype, ReduceOp op, double prescale,
                                        CommHandle comm, StreamHandle stream) {
  const char* call = "ncclReduceScatter";
  KOLO_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(call, dtype));
  KOLO_RETURN_IF_ERROR(NcclOp(call, op).status());
  KOLO_RETURN_IF_ERROR(CheckPrescale(call, dtype, op, prescale));
  KOLO_ASSIGN_OR_RETURN(Comm * c, Usable(call, comm));
  KOLO_ASSIGN_OR_RETURN(const Reduction r,
                        ReductionFor(call, dtype, type, op, prescale, *c, options_));
  return Reduced(
      Enqueued(call, ncclReduceScatter(send, recv, recv_count, type, r.op, c->comm, Raw(stream)),
               *c, options_),
      r, *c, options_);
}

Status NcclCollectiveApi::GroupStart() {
  const ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return Error("ncclGroupStart", result, nullptr);
  ++tls_group_depth;
  return Status::Ok();
}

Status NcclCollectiveApi::GroupEnd() {
  if (tls_group_depth > 0) --tls_group_depth;  // NCCL closes the group even when it fails
  const ncclResult_t result = ncclGroupEnd();
  if (tls_group_depth > 0) {  // an inner end launches nothing
    return result == ncclSuccess ? Status::Ok() : Error("ncclGroupEnd", result, nullptr);
  }
  std::vector<Comm*> comms;
  comms.swap(tls_group_comms);
  if (result == ncclSuccess) return Status::Ok();
  if (result != ncclInProgress) {
    return Error("ncclGroupEnd", result, comms.empty() ? nullptr : comms.front()->comm);
  }
  // Launching on non-blocking comms: each comm of the group settles, by one deadline.
  const Clock::TimePoint deadline = options_.clock->Now() + options_.call_timeout;
  for (Comm* c : comms) {
    if (!c->abort_error.ok()) continue;
    KOLO_RETURN_IF_ERROR(Settle("ncclGroupEnd (" + c->where + ")", ncclInProgress, *c,
                                *options_.clock, deadline, options_.call_timeout));
  }
  return Status::Ok();
}

Status NcclCollectiveApi::Send(const void* send, size_t count, DataType dtype, int peer,
                               CommHandle comm, StreamHandle stream) {
  const char* call = "ncclSend";
  KOLO_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(call, dtype));
  KOLO_ASSIGN_OR_RETURN(Comm * c, Usable(call, comm));
  return Enqueued(call, ncclSend(send, count, type, peer, c->comm, Raw(stream)), *c, options_);
}

Status NcclCollectiveApi::Recv(void* recv, size_t count, DataType dtype, int peer, CommHandle comm,
                               StreamHandle stream) {
  const char* call = "ncclRecv";
  KOLO_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(call, dtype));
  KOLO_ASSIGN_OR_RETURN(Comm * c, Usable(call, comm));
  return Enqueued(call, ncclRecv(recv, count, type, peer, c->comm, Raw(stream)), *c, options_);
}

Status NcclCollectiveApi::Abort(CommHandle handle) {
  Comm* c = CommOf(handle);
  if (c == nullptr) return InvalidArgument("ncclCommAbort: not a communicator (null)");
  if (!c->abort_error.ok()) return Status::Ok();  // NCCL freed the comm the first time
  const std::string call = "ncclCommAbort (" + c->where + ")";
  const ncclResult_t result = ncclCommAbort(c->comm);
  c->comm = nullptr;
  // What the simulator says too: the comm's later calls fail with this.
  c->abort_error = CollectiveError(call, kNcclSystemError, "the communicator was aborted", "");
  if (result == ncclSuccess || result == ncclInProgress) return Status::Ok();
  return Error(call, result, nullptr);
}

Status NcclCollectiveApi::Destroy(CommHandle handle) {
  std::unique_ptr<Comm> c(CommOf(handle));
  if (c == nullptr) return InvalidArgument("ncclCommDestroy: not a communicator (null)");
  tls_group_comms.erase(std::remove(tls_group_comms.begin(), tls_group_comms.end(), c.get()),
                        tls_group_comms.end());
  if (!c->abort_error.ok()) return Status::Ok();
  const std::string where = " (" + c->where + ")";
  ncclResult_t state = ncclSuccess;
  const ncclResult_t polled = ncclCommGetAsyncError(c->comm, &state);
  if (polled != ncclSuccess || state == ncclInProgress) {
    // NCCL takes no call on a comm in progress but the abort.
    Status why = polled != ncclSuccess
                     ? Error("ncclCommGetAsyncError" + where, polled, c->comm)
                     : CollectiveError("ncclCommDestroy" + where, kNcclInvalidUsage,
                                       c->ready ? "destroyed while a call was in progress"
                                                : "destroyed while initialising",
                                       "");
    ncclCommAbort(c->comm);
    return Status(why.code(), why.message() + ": aborted it");
  }
  if (state != ncclSuccess) {
    // A failed comm (PollComm reported it): finalizing would wait on peers that may be gone.
    ncclCommAbort(c->comm);
    return Status::Ok();
  }
  const Status finalized =
      Settle("ncclCommFinalize" + where, ncclCommFinalize(c->comm), *c, *options_.clock,
             options_.clock->Now() + options_.destroy_timeout, options_.destroy_timeout);
  if (!finalized.ok()) {
    ncclCommAbort(c->comm);
    return Status(finalized.code(), finalized.message() + ": aborted it");
  }
  const ncclResult_t destroyed = ncclCommDestroy(c->comm);
  if (destroyed != ncclSuccess) return Error("ncclCommDestroy" + where, destroyed, nullptr);
  return Status::Ok();
}

}  // namespace kolo::gpu
