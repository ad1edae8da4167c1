// KoloBackend: torch.distributed's c10d::Backend over kolo's default runtime, the backend
// `dist.init_process_group("kolo")` makes (python/kolo/torch/distributed.py registers it and
// does the rendezvous; docs/TORCH-DISTRIBUTED.md). Each c10d collective becomes one kolo op,
// named by the group's OpNamer, in the group's kolo process set (0 for the world); what c10d
// has and kolo has not is built from kolo's ops (reduce from allreduce, gather and scatter
// from alltoall, barrier from a one-byte allreduce) or refused with a RuntimeError saying so
// (bitwise reductions). send, recv and monitoredBarrier are kolo's point-to-point ops
// (PeerOps, peer_ops.h), which are not named.
//
// Threading: collectives may be called from any thread; one lock orders naming and enqueueing,
// so the group's kolo names follow the order torch issues them in. A synchronous call
// (async_op=False) drives its op on the calling thread as kolo's blocking calls do. Ops
// complete on kolo's threads (KoloWork). The GIL is released around every wait.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <vector>

#include "kolo/kolo.h"
#include "python/csrc/c10d/kolo_work.h"
#include "python/csrc/c10d/op_namer.h"
#include "python/csrc/c10d/peer_ops.h"

namespace kolo::torch_ext {

class KoloBackend : public c10d::Backend {
 public:
  struct Config {
    int rank = 0;  // in the group
    int size = 1;
    int process_set = 0;     // kolo's process set of the group
    std::vector<int> ranks;  // the group's job ranks, in group-rank order
    std::string group_name;  // torch's ("0" for the world)
    std::chrono::milliseconds timeout{0};
  };
  explicit KoloBackend(Config config);

  const std::string getBackendName() const override { return "kolo"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t getSequenceNumberForGroup() override;
  // Closes the group: later collectives fail. kolo itself stays up (distributed.py shuts it
  // down at the next init_process_group or at exit; docs/TORCH-DISTRIBUTED.md says why).
  void shutdown() override;

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // kolo_backend_gather.cc
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;

  // kolo_backend_scatter.cc
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& output_splits,
                                                   std::vector<int64_t>& input_splits,
                                                   const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

  // Point-to-point (PeerOps): kolo's send and receive, under the group's timeout.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  // torch's 30-minute default timeout (monitored_barrier() without one) is the group's.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  // torch's _coalescing_manager(group, device): the ops issued in between (point-to-point
  // ops, or the coalesced collective it issues) behind one Work (coalesced_work.h).
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

 private:
  // One collective on its way to kolo.
  struct Launch {
    c10d::OpType type = c10d::OpType::UNKNOWN;
    const char* title = nullptr;  // profiler title
    const char* op = nullptr;     // c10d's name of the op, for messages
    Signature signature;          // the next collective's name depends on it
    std::vector<at::Tensor> outputs;
    std::vector<at::Tensor> keep_alive;
    std::vector<at::Tensor> cuda_inputs;  // whose streams must finish before kolo reads them
    std::function<Status()> finish;
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout;
    bool async = true;
    bool barrier = false;  // completes after the group's earlier ops
  };
  // Enqueues the op under `name` with `done` as its callback (a kolo *_async call).
  using Enqueue = std::function<Status(const std::string& name, Callback done)>;

  // Names the op, waits if that name is still in flight here, hands it to kolo in the group's
  // process set, and returns its work. Throws the enqueue's error (the op then does not count).
  c10::intrusive_ptr<c10d::Work> Issue(Launch launch, const Enqueue& enqueue);
  // reduce_scatter and reduce_scatter_tensor once their input is one flat tensor: `output`
  // receives this rank's part of the reduction of `flat_in`.
  c10::intrusive_ptr<c10d::Work> IssueReducescatter(c10d::OpType type, const char* title,
                                                    const char* op, const at::Tensor& output,
                                                    const at::Tensor& flat_in,
                                                    const AllreduceOptions& reduction,
                                                    const c10d::ReduceScatterOptions& opts);
  // What a gathering op does with the rows that arrived ([group size, n]; [0, n] off a gather's
  // root) once they fit: unpack them into a list, or copy its own buffer back.
  using Deliver = std::function<Status(const at::Tensor& rows)>;
  // allgather and all_gather_into_tensor: every rank's flattened `input` lands in its row of
  // `rows`. `launch` brings the type, titles, outputs and any buffers of its own to keep alive.
  c10::intrusive_ptr<c10d::Work> IssueAllgather(Launch launch, const at::Tensor& input,
                                                const at::Tensor& rows, Deliver deliver,
                                                const c10d::AllgatherOptions& opts);
  // gather and gather_into_tensor: every rank sends its flattened `input` to the root, whose
  // `rows` receive them in rank order (kolo's alltoall, only the root receiving).
  c10::intrusive_ptr<c10d::Work> IssueGather(Launch launch, const at::Tensor& input,
                                             const at::Tensor& rows, Deliver deliver,
                                             const c10d::GatherOptions& opts);
  // The group's collectives on their way to kolo, in issue order.
  struct Ledger {
    explicit Ledger(const std::string& group_name) : namer("c10d." + group_name) {}
    std::mutex mu;
    OpNamer namer;                            // guarded by mu
    std::map<std::string, Handle> in_flight;  // guarded by mu: the last op of each name
  };

  std::chrono::milliseconds TimeoutOf(std::chrono::milliseconds requested) const;
  // Throws when the group cannot take ops any more: shut down, or (`collective`) desynchronised.
  void CheckUsable(const char* op, bool collective = true) const;

  const Config config_;
  const std::shared_ptr<GroupHealth> health_ = std::make_shared<GroupHealth>();
  std::atomic<int64_t> timeout_ms_;
  std::atomic<bool> closed_{false};
  Ledger ledger_;
  PeerOps peers_;
};

// Shared by the two halves of the backend (kolo_backend*.cc): argument checks and conversions
// that throw the RuntimeError torch's own backends throw for bad arguments.
namespace c10d_args {

// The only tensor of `tensors` (c10d's lists of one tensor per device: kolo takes one).
at::Tensor Single(const std::vector<at::Tensor>& tensors, const char* op);
// kolo's view of a contiguous tensor (throws for another layout, dtype or device).
TensorView View(const at::Tensor& tensor, const char* op);
// kolo's reduction for c10d's `reduce_op` on `tensor` (PREMUL_SUM becomes a prescale factor).
AllreduceOptions Reduction(const c10d::ReduceOp& reduce_op, const at::Tensor& tensor,
                           const char* op);
// Adds kolo's op type to a collective's signature. A signature holds what kolo compares across
// ranks and nothing else (op type, dtype, the shape kolo is given, CPU or GPU, reduce op,
// scale, broadcast root): where kolo finds the ranks agree, their next names agree too.
Signature& Begin(Signature* signature, OpType op);
// Adds the fields of a view that kolo compares; `rows_may_differ` for allgather and alltoall,
// where kolo compares the dimensions after the first only.
void AddView(Signature* signature, const TensorView& view, bool rows_may_differ = false);
// A contiguous tensor holding `tensor`'s data (itself when contiguous) and the copy back.
struct Contiguous {
  explicit Contiguous(const at::Tensor& tensor);
  at::Tensor original;
  at::Tensor buffer;
  Status CopyBack() const;
};
// A collective's finish: copies every buffer back into its original, in order.
std::function<Status()> CopyBackAll(std::vector<std::shared_ptr<Contiguous>> ios);
// The names of a grouped op's members: `name`#0, `name`#1, ...
std::vector<std::string> MemberNames(const std::string& name, size_t count);
// Throws unless `root` is a rank of a group of `size`.
void CheckRoot(int64_t root, int size, const char* op);
[[noreturn]] void Fail(const std::string& message);

}  // namespace c10d_args
}  // namespace kolo::torch_ext
