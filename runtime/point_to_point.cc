// kolo/p2p.h: point-to-point ops, checked here and carried out by the runtime's P2pLane
// (transport/p2p/p2p_lane.h).
#include <memory>
#include <string>
#include <utility>

#include "core/loop/callback_thread.h"
#include "kolo/kolo.h"
#include "kolo/p2p.h"
#include "runtime/handle_state.h"
#include "runtime/runtime_access.h"
#include "runtime/runtime_impl.h"
#include "transport/p2p/p2p_lane.h"

namespace kolo {
namespace {

using transport::P2pRequest;

struct Op {
  bool send = false;
  TensorView tensor;
  int peer = 0;
  int64_t tag = 0;
  int* source = nullptr;
  P2pOptions options;
};

std::string Describe(const Op& op, int set) {
  std::string text = op.send                 ? "send to rank " + std::to_string(op.peer)
                     : op.peer == kAnySource ? std::string("recv from any rank")
                                             : "recv from rank " + std::to_string(op.peer);
  text += " (tag " + std::to_string(op.tag) + ")";
  if (set != 0) text += " [process set " + std::to_string(set) + "]";
  return text;
}

Status CheckTensor(const TensorView& tensor, const std::string& what) {
  for (int64_t dim : tensor.shape) {
    if (dim < 0) {
      return InvalidArgument(what + ": negative dimension in shape " + ShapeToString(tensor.shape));
    }
  }
  if (!tensor.device.is_cpu()) {
    return InvalidArgument(what + ": the tensor is on GPU " + std::to_string(tensor.device.index) +
                           "; kolo's point-to-point takes CPU tensors (docs/P2P.md)");
  }
  if (tensor.data == nullptr && tensor.num_bytes() > 0) {
    return InvalidArgument(what + ": the tensor has no data pointer");
  }
  return Status::Ok();
}

// The lane's request for `op`, checked: the set, the peer, the tensor, the lane.
StatusOr<std::shared_ptr<P2pRequest>> MakeRequest(RuntimeImpl& impl, const Op& op) {
  KOLO_ASSIGN_OR_RETURN(const SetMembership set, impl.CurrentMembership(op.send ? "send" : "recv"));
  const std::string what = Describe(op, set.id);
  const bool any = !op.send && op.peer == kAnySource;
  if (!any && (op.peer < 0 || op.peer >= set.size)) {
    return InvalidArgument(what + ": rank " + std::to_string(op.peer) + " is not a rank of " +
                           (set.id == 0 ? "this job" : "process set " + std::to_string(set.id)) +
                           " (size " + std::to_string(set.size) + ")");
  }
  if (op.peer == set.rank) return InvalidArgument(what + ": the peer is this rank itself");
  KOLO_RETURN_IF_ERROR(CheckTensor(op.tensor, what));
  if (op.options.timeout_seconds != op.options.timeout_seconds) {  // NaN
    return InvalidArgument(what + ": P2pOptions::timeout_seconds is not a number");
  }
  if (internal::RuntimeAccess::P2pLane(impl) == nullptr) {
    return FailedPrecondition(
        what + ": this job has no point-to-point connections (KOLO_P2P=" + impl.options().p2p +
        " with " + std::to_string(impl.options().size) +
        " ranks; auto connects them up to 64 ranks): set KOLO_P2P=on on every rank");
  }
  auto request = std::make_shared<P2pRequest>();
  request->is_send = op.send;
  request->set = set.id;
  request->tag = op.tag;
  request->data = op.tensor.data;
  request->bytes = op.tensor.num_bytes();
  request->dtype = op.tensor.dtype;
  if (set.id != 0) request->members = impl.process_sets().Members(set.id);
  request->peer = any ? -1 : set.id == 0 ? op.peer : request->members[op.peer];
  request->what = what;
  request->source = op.source;
  request->timeout_seconds =
      op.options.timeout_seconds > 0 ? op.options.timeout_seconds : impl.options().timeout_seconds;
  return request;
}

Status Post(RuntimeImpl& impl, const Op& op, Callback callback, bool done_anywhere,
            bool caller_drives = false) {
  if (!callback) return InvalidArgument(Describe(op, 0) + ": no callback");
  KOLO_ASSIGN_OR_RETURN(std::shared_ptr<P2pRequest> request, MakeRequest(impl, op));
  if (done_anywhere) {
    request->done = std::move(callback);
  } else {  // the caller's own callback: on the lane's thread, as kolo's callbacks run
    request->done = [callback = std::move(callback)](const Status& status) {
      CallbackThreadScope on_callback_thread;
      callback(status);
    };
  }
  request->done_anywhere = done_anywhere;
  return internal::RuntimeAccess::P2pLane(impl)->Post(std::move(request), caller_drives);
}

StatusOr<Handle> PostForHandle(RuntimeImpl& impl, const Op& op, bool caller_drives = false) {
  return internal::HandleAccess::Submit([&](Callback done) {
    return Post(impl, op, std::move(done), /*done_anywhere=*/true, caller_drives);
  });
}

// The blocking forms: the transfer runs on this thread for the runtime's spin budget, then the
// wait sleeps until the lane's thread completes it (every op ends within its timeout).
Status PostAndWait(RuntimeImpl& impl, const Op& op) {
  if (OnCallbackThread()) {
    return FailedPrecondition(std::string(op.send ? "send" : "recv") +
                              " was called from a kolo callback; call it from your own thread or "
                              "use the async form");
  }
  KOLO_ASSIGN_OR_RETURN(Handle handle, PostForHandle(impl, op, /*caller_drives=*/true));
  if (transport::P2pLane* lane = internal::RuntimeAccess::P2pLane(impl)) {
    lane->Drive([&handle] { return handle.Poll(); }, impl.wait_spin());
  }
  return handle.Synchronize();
}

Op SendOp(const TensorView& tensor, int dst, int64_t tag, const P2pOptions& options) {
  return Op{true, tensor, dst, tag, nullptr, options};
}

Op RecvOp(const TensorView& tensor, int src, int64_t tag, int* source, const P2pOptions& options) {
  return Op{false, tensor, src, tag, source, options};
}

// Calls `fn` on the default runtime's RuntimeImpl, or fails when kolo::init() made none.
template <typename Fn>
auto OnDefault(Fn&& fn) -> decltype(fn(std::declval<RuntimeImpl&>())) {
  std::shared_ptr<Runtime> rt = internal::CurrentDefaultRuntime();
  if (!rt) return internal::DefaultRuntimeMissing();
  return fn(internal::RuntimeAccess::Impl(*rt));
}

}  // namespace

PointToPoint::PointToPoint(Runtime& runtime) : impl_(&internal::RuntimeAccess::Impl(runtime)) {}

Status PointToPoint::SendAsync(const TensorView& tensor, int dst, int64_t tag,
                               const P2pOptions& options, Callback callback) {
  return Post(*impl_, SendOp(tensor, dst, tag, options), std::move(callback), false);
}

StatusOr<Handle> PointToPoint::SendAsync(const TensorView& tensor, int dst, int64_t tag,
                                         const P2pOptions& options) {
  return PostForHandle(*impl_, SendOp(tensor, dst, tag, options));
}

Status PointToPoint::Send(const TensorView& tensor, int dst, int64_t tag,
                          const P2pOptions& options) {
  return PostAndWait(*impl_, SendOp(tensor, dst, tag, options));
}

Status PointToPoint::RecvAsync(const TensorView& tensor, int src, int64_t tag, int* source,
                               const P2pOptions& options, Callback callback) {
  return Post(*impl_, RecvOp(tensor, src, tag, source, options), std::move(callback), false);
}

StatusOr<Handle> PointToPoint::RecvAsync(const TensorView& tensor, int src, int64_t tag,
                                         int* source, const P2pOptions& options) {
  return PostForHandle(*impl_, RecvOp(tensor, src, tag, source, options));
}

StatusOr<int> PointToPoint::Recv(const TensorView& tensor, int src, int64_t tag,
                                 const P2pOptions& options) {
  int source = -1;
  KOLO_RETURN_IF_ERROR(PostAndWait(*impl_, RecvOp(tensor, src, tag, &source, options)));
  return source;
}

Status send_async(const TensorView& tensor, int dst, int64_t tag, const P2pOptions& options,
                  Callback callback) {
  return OnDefault([&](RuntimeImpl& impl) {
    return Post(impl, SendOp(tensor, dst, tag, options), std::move(callback), false);
  });
}

StatusOr<Handle> send_async(const TensorView& tensor, int dst, int64_t tag,
                            const P2pOptions& options) {
  return OnDefault([&](RuntimeImpl& impl) -> StatusOr<Handle> {
    return PostForHandle(impl, SendOp(tensor, dst, tag, options));
  });
}

Status send(const TensorView& tensor, int dst, int64_t tag, const P2pOptions& options) {
  return OnDefault(
      [&](RuntimeImpl& impl) { return PostAndWait(impl, SendOp(tensor, dst, tag, options)); });
}

Status recv_async(const TensorView& tensor, int src, int64_t tag, int* source,
                  const P2pOptions& options, Callback callback) {
  return OnDefault([&](RuntimeImpl& impl) {
    return Post(impl, RecvOp(tensor, src, tag, source, options), std::move(callback), false);
  });
}

StatusOr<Handle> recv_async(const TensorView& tensor, int src, int64_t tag, int* source,
                            const P2pOptions& options) {
  return OnDefault([&](RuntimeImpl& impl) -> StatusOr<Handle> {
    return PostForHandle(impl, RecvOp(tensor, src, tag, source, options));
  });
}

StatusOr<int> recv(const TensorView& tensor, int src, int64_t tag, const P2pOptions& options) {
  return OnDefault([&](RuntimeImpl& impl) -> StatusOr<int> {
    int source = -1;
    KOLO_RETURN_IF_ERROR(PostAndWait(impl, RecvOp(tensor, src, tag, &source, options)));
    return source;
  });
}

}  // namespace kolo
