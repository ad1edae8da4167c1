#include "tests/support/sim_gpu/sim_comm.h"

#include <cstring>

#include "ops/gpu/collective_error.h"
#include "ops/reduce_kernels.h"

namespace kolo::gpu::sim {
namespace {

// ncclGetErrorString's texts (NCCL 2.28.9).
const char* NcclText(int code) {
  switch (code) {
    case kNcclSuccess:
      return "no error";
    case kNcclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case kNcclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case kNcclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case kNcclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case kNcclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case kNcclRemoteError:
      return "remote process exited or there was a network error";
    case kNcclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

std::string FaultName(SimCollectives::Fault fault) {
  switch (fault) {
    case SimCollectives::Fault::kAsyncError:
      return "async error";
    case SimCollectives::Fault::kHang:
      return "hang";
    case SimCollectives::Fault::kVanish:
      return "peer loss";
    case SimCollectives::Fault::kNone:
      break;
  }
  return "none";
}

}  // namespace

Status NcclError(const char* call, int code, const std::string& last_error) {
  return CollectiveError(call, code, NcclText(code), last_error);
}

Status LinkError(const char* call, const Status& link_status) {
  switch (link_status.code()) {
    case StatusCode::kUnavailable:  // a rank closed its connection
      return NcclError(call, kNcclRemoteError, link_status.message());
    case StatusCode::kInvalidArgument:
      return NcclError(call, kNcclInvalidUsage, link_status.message());
    default:
      return NcclError(call, kNcclSystemError, link_status.message());
  }
}

SimCollectives::Comm::Comm(std::string name, int size_in, int rank_in, int device_in,
                           SimDevice* sim_device_in, const Options& options_in)
    : size(size_in),
      rank(rank_in),
      device(device_in),
      sim_device(sim_device_in),
      options(options_in),
      link(std::move(name), size_in, rank_in) {}

void SimCollectives::Comm::Fail(const Status& failure) {
  std::lock_guard<std::mutex> lock(mu);
  if (error.ok()) error = failure;
  cv.notify_all();
}

Status SimCollectives::Comm::FirstError() {
  std::lock_guard<std::mutex> lock(mu);
  return error;
}

void SimCollectives::Comm::Abort() {
  {
    std::lock_guard<std::mutex> lock(mu);
    aborted = true;
  }
  link.Abort();
  Fail(NcclError("ncclCommAbort", kNcclSystemError,
                 "rank " + std::to_string(rank) + "'s communicator was aborted"));
}

void SimCollectives::Comm::OpEnqueued() {
  std::lock_guard<std::mutex> lock(mu);
  ++pending;
}

void SimCollectives::Comm::OpDone() {
  std::lock_guard<std::mutex> lock(mu);
  --pending;
  cv.notify_all();
}

bool SimCollectives::Comm::WaitIdle(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu);
  return cv.wait_until(lock, deadline, [&] { return pending == 0; });
}

void SimCollectives::Comm::Bootstrap() {
  const Clock::time_point start = Clock::now();
  {
    // The injected slowness: in progress for a while, still ended by Abort.
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_until(lock, start + options.init_delay, [&] { return aborted; });
  }
  const Status joined = link.Join(start + options.init_delay + options.init_timeout);
  std::lock_guard<std::mutex> lock(mu);
  if (!joined.ok()) {
    if (error.ok()) error = LinkError("ncclCommInitRank", joined);
  } else if (error.ok()) {
    ready = true;
  }
  cv.notify_all();
}

StatusOr<Contribution> SimCollectives::Comm::Contribute(const Plan& plan, uint64_t seq) const {
  Contribution c;
  c.kind = plan.kind;
  c.dtype = plan.dtype;
  c.op = plan.op;
  c.root = plan.root;
  c.count = plan.count;
  c.seq = seq;
  const size_t esize = DataTypeSize(plan.dtype);
  size_t elements = plan.count;  // what this rank sends
  if (plan.kind == OpKind::kReduceScatter) elements *= static_cast<size_t>(size);
  if (plan.kind == OpKind::kBroadcast && rank != plan.root) elements = 0;
  if (plan.kind == OpKind::kSendRecv) {
    for (const Plan::P2p& p : plan.p2p) {
      c.p2p.push_back(P2pEntry{p.send ? 1 : 0, p.peer, p.bytes});
      if (!p.send || p.bytes == 0) continue;
      const void* shadow = sim_device->Shadow(p.buf, p.bytes);
      if (shadow == nullptr) {
        return NcclError(OpCall(plan.kind), kNcclUnhandledCudaError,
                         "an illegal memory access was encountered (a Send buffer was freed)");
      }
      const auto* bytes = static_cast<const uint8_t*>(shadow);
      c.payload.insert(c.payload.end(), bytes, bytes + p.bytes);
    }
    return c;
  }
  c.payload.resize(elements * esize);
  if (elements > 0) {
    // Translated when the op runs: memory freed meanwhile is an illegal address.
    const void* shadow = sim_device->Shadow(plan.send, elements * esize);
    if (shadow == nullptr) {
      return NcclError(OpCall(plan.kind), kNcclUnhandledCudaError,
                       "an illegal memory access was encountered (the send buffer was freed)");
    }
    ops::ScaleCopy(c.payload.data(), shadow, elements, plan.dtype, plan.prescale);
  }
  return c;
}

Status SimCollectives::Comm::Deliver(const Plan& plan, const Reply& reply) const {
  if (plan.kind == OpKind::kSendRecv) {
    size_t at = 0;
    for (const Plan::P2p& p : plan.p2p) {
      if (p.send || p.bytes == 0) continue;
      void* shadow = sim_device->Shadow(p.buf, p.bytes);
      if (shadow == nullptr || at + p.bytes > reply.payload.size()) {
        return NcclError(OpCall(plan.kind), kNcclUnhandledCudaError,
                         "an illegal memory access was encountered (a Recv buffer was freed)");
      }
      std::memcpy(shadow, reply.payload.data() + at, p.bytes);
      at += p.bytes;
    }
    return Status::Ok();
  }
  if (reply.payload.empty()) return Status::Ok();
  void* shadow = sim_device->Shadow(plan.recv, reply.payload.size());
  if (shadow == nullptr) {
    return NcclError(OpCall(plan.kind), kNcclUnhandledCudaError,
                     "an illegal memory access was encountered (the recv buffer was freed)");
  }
  std::memcpy(shadow, reply.payload.data(), reply.payload.size());
  return Status::Ok();
}

StatusOr<Reply> SimCollectives::Comm::Exchange(const Contribution& mine,
                                               Clock::time_point deadline) {
  const char* call = OpCall(mine.kind);
  if (rank != 0) {
    Status sent = link.Send(0, Encode(mine), deadline);
    if (!sent.ok()) return LinkError(call, sent);
    if (mine.error != 0) return Reply{};  // failed here: the caller reports its own error
    StatusOr<std::vector<uint8_t>> answer = link.Recv(0, deadline);
    if (!answer.ok()) return LinkError(call, answer.status());
    return DecodeReply(*answer);
  }
  std::vector<Contribution> by_rank(static_cast<size_t>(size));
  by_rank[0] = mine;
  std::vector<Reply> replies;
  for (int r = 1; r < size && replies.empty(); ++r) {
    StatusOr<std::vector<uint8_t>> bytes = link.Recv(r, deadline);
    StatusOr<Contribution> c = bytes.ok() ? DecodeContribution(*bytes) : bytes.status();
    if (c.ok()) {
      by_rank[static_cast<size_t>(r)] = std::move(*c);
      continue;
    }
    // Every rank still connected learns why the op failed, instead of waiting for nothing.
    const Status failed = LinkError(call, c.status());
    Reply reply;
    reply.error = failed.code() == StatusCode::kAborted ? kNcclRemoteError : kNcclSystemError;
    reply.error_text = c.status().message();
    replies.assign(static_cast<size_t>(size), reply);
  }
  if (replies.empty()) replies = Combine(by_rank);
  for (int r = 1; r < size; ++r) {
    // Best effort: a rank that left is reported by its own failure, not by this one.
    link.Send(r, Encode(replies[static_cast<size_t>(r)]), deadline).IgnoreError();
  }
  return replies[0];
}

Status SimCollectives::Comm::InjectFault(const char* call, uint64_t seq,
                                         Clock::time_point deadline) {
  const std::string what = "simulated " + FaultName(options.fault) + " on rank " +
                           std::to_string(rank) + " after " + std::to_string(seq) + " ops";
  switch (options.fault) {
    case Fault::kAsyncError:
      return NcclError(call, kNcclRemoteError, what);
    case Fault::kHang: {
      std::unique_lock<std::mutex> lock(mu);
      const bool released = cv.wait_until(lock, deadline, [&] { return aborted; });
      return NcclError(call, kNcclSystemError,
                       what + (released ? ": released by ncclCommAbort" : ": op deadline passed"));
    }
    case Fault::kVanish:
      link.Abort();
      return NcclError(call, kNcclRemoteError, what + ": this rank left the communicator");
    case Fault::kNone:
      break;
  }
  return Status::Ok();
}

Status SimCollectives::Comm::Run(const Plan& plan) {
  const char* call = OpCall(plan.kind);
  std::lock_guard<std::mutex> op_lock(op_mu_);
  KOLO_RETURN_IF_ERROR(FirstError());  // a failed comm fails every later op with its cause
  const uint64_t seq = ops_run_++;
  const Clock::time_point deadline = Clock::now() + options.op_timeout;
  Status local;  // this rank's own failure of the op
  StatusOr<Contribution> mine = Internal("no contribution");
  if (options.fault != Fault::kNone && seq >= static_cast<uint64_t>(options.fault_after_ops)) {
    local = InjectFault(call, seq, deadline);
  } else {
    mine = Contribute(plan, seq);
    local = mine.status();
  }
  if (!local.ok()) {
    // The peers learn the root cause from this rank's contribution instead of waiting for it
    // (a rank that left or was aborted cannot tell them: they see its connection close).
    Contribution poisoned;
    poisoned.kind = plan.kind;
    poisoned.seq = seq;
    poisoned.error = kNcclRemoteError;
    const std::string& message = local.message();
    const size_t last = message.find("; last error: ");
    poisoned.error_text = last == std::string::npos ? message : message.substr(last + 14);
    Exchange(poisoned, deadline).status().IgnoreError();  // this rank's error is `local`
    Fail(local);
    return local;
  }
  StatusOr<Reply> reply = Exchange(*mine, deadline);
  Status result;
  if (!reply.ok()) {
    result = reply.status();
  } else if (reply->error != 0) {
    result = NcclError(call, reply->error, reply->error_text);
  } else {
    result = Deliver(plan, *reply);
  }
  if (!result.ok()) Fail(result);
  return result;
}

}  // namespace kolo::gpu::sim
