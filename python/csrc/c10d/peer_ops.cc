// PeerOps: send and recv (any source too) on kolo's point-to-point ops.
#include "python/csrc/c10d/peer_ops.h"

#include <torch/extension.h>

#include <memory>
#include <optional>
#include <utility>

#include "kolo/kolo.h"
#include "kolo/p2p.h"
#include "python/csrc/c10d/kolo_backend.h"
#include "python/csrc/c10d/kolo_work.h"

namespace kolo::torch_ext {

using namespace c10d_args;  // NOLINT: the backend's shared helpers

namespace {

// "send to rank 1 with tag 0 in process group '0'": an op as its errors name it.
std::string Describe(bool send, int peer, int tag, const std::string& group_name) {
  std::string what = send ? "send to rank " : "recv from ";
  if (!send) what += peer == kAnySource ? "any rank" : "rank ";
  if (send || peer != kAnySource) what += std::to_string(peer);
  return what + " with tag " + std::to_string(tag) + " in process group '" + group_name + "'";
}

}  // namespace

PeerOps::PeerOps(Group group) : group_(std::move(group)) {
  for (size_t g = 0; g < group_.set_ranks.size(); ++g) {
    const int set_rank = group_.set_ranks[g];
    if (set_rank < 0) continue;
    if (static_cast<size_t>(set_rank) >= group_of_set_.size()) {
      group_of_set_.resize(static_cast<size_t>(set_rank) + 1, -1);
    }
    group_of_set_[static_cast<size_t>(set_rank)] = static_cast<int>(g);
  }
}

void PeerOps::CheckPeer(int peer, const char* op, const char* role) const {
  if (peer < 0 || peer >= group_.size) {
    Fail(std::string(op) + ": " + role + " rank " + std::to_string(peer) +
         " is not a rank of process group '" + group_.name + "' (of " +
         std::to_string(group_.size) + " ranks)");
  }
  if (peer == group_.rank) {
    Fail(std::string(op) + ": " + role + " rank " + std::to_string(peer) +
         " is this rank: kolo's point-to-point ops go between two ranks (as gloo's)");
  }
  if (group_.set_ranks[static_cast<size_t>(peer)] < 0) {
    Fail(std::string(op) + ": rank " + std::to_string(peer) + " of process group '" + group_.name +
         "' is not in its kolo process set " + std::to_string(group_.process_set));
  }
}

c10::intrusive_ptr<c10d::Work> PeerOps::Send(const at::Tensor& tensor, int dst, int tag,
                                             std::chrono::milliseconds timeout) {
  CheckPeer(dst, "send", "destination");
  return Post(true, tensor, dst, tag, timeout);
}

c10::intrusive_ptr<c10d::Work> PeerOps::Recv(const at::Tensor& tensor, int src, int tag,
                                             std::chrono::milliseconds timeout) {
  if (src != kAnySource) CheckPeer(src, "recv", "source");
  return Post(false, tensor, src, tag, timeout);
}

c10::intrusive_ptr<c10d::Work> PeerOps::Post(bool send, const at::Tensor& tensor, int peer, int tag,
                                             std::chrono::milliseconds timeout) {
  const char* op = send ? "send" : "recv";
  if (tag < 0) {
    Fail(std::string(op) + ": tag " + std::to_string(tag) + " is negative (c10d's tags are " +
         "nonnegative, as gloo requires)");
  }
  auto io = std::make_shared<Contiguous>(tensor);
  const TensorView view = View(io->buffer, op);
  const int kolo_peer =
      peer == kAnySource ? kAnySource : group_.set_ranks[static_cast<size_t>(peer)];
  // Where kolo writes the sender's set rank; the finisher makes it a group rank.
  auto source = send ? nullptr : std::make_shared<int>(kolo_peer);
  KoloWork::Spec spec;
  spec.rank = group_.rank;
  spec.type = send                 ? c10d::OpType::SEND
              : peer == kAnySource ? c10d::OpType::RECVANYSOURCE
                                   : c10d::OpType::RECV;
  spec.title = send ? "kolo:send" : peer == kAnySource ? "kolo:recvAnySource" : "kolo:recv";
  spec.what = Describe(send, peer, tag, group_.name);
  spec.outputs = {tensor};
  spec.keep_alive = {io->buffer};
  if (!send) {
    spec.finish = [io, source, group_of_set = group_of_set_] {
      const size_t set_rank = static_cast<size_t>(*source);
      *source = set_rank < group_of_set.size() ? group_of_set[set_rank] : -1;
      return io->CopyBack();
    };
  }
  spec.timeout = timeout;
  spec.grace = timeout / 10 + std::chrono::seconds(2);
  spec.source = source;
  auto work = c10::make_intrusive<KoloWork>(std::move(spec));
  P2pOptions options;
  options.timeout_seconds = std::chrono::duration<double>(timeout).count();
  StatusOr<Handle> handle = InvalidArgument("unreached");
  {
    std::optional<pybind11::gil_scoped_release> no_gil;
    if (PyGILState_Check() != 0) no_gil.emplace();
    ProcessSetScope in_set(group_.process_set);
    handle = enqueue_tracked(
        [&](Callback done) {
          return send ? kolo::send_async(view, kolo_peer, tag, options, std::move(done))
                      : kolo::recv_async(view, kolo_peer, tag, source.get(), options,
                                         std::move(done));
        },
        [work](const Status& status) { work->Complete(status); }, /*drive=*/false);
  }
  if (!handle.ok()) std::rethrow_exception(ToException(handle.status(), work->what()));
  work->Track(*handle, {});
  coalescer_.Add(work);
  return work;
}

}  // namespace kolo::torch_ext
