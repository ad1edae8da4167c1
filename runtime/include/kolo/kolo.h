// kolo's public C++ API: named, asynchronous collective operations for data-parallel training.
//
// Threading: every function here may be called from any thread. enqueue-style *_async calls
// validate locally, queue the op and return at once; they never wait on the network. The
// blocking wrappers wait for the op's callback; every failure (mismatch, lost peer,
// data-plane deadline, shutdown) ends it within the runtime's deadlines; a peer that is
// alive and never submits the op keeps it waiting, reported by the stall inspector
// (KOLO_STALL_CHECK_SECONDS) and ended by it only if KOLO_STALL_SHUTDOWN_SECONDS is set. Blocking
// calls (Allreduce, Shutdown, init, shutdown) fail with kFailedPrecondition when called from a
// callback.
//
// Instead of a callback, the *_async forms without one return a Handle to poll or wait on
// (kolo/handle.h). Callback, Allocator and AllreduceOptions are in kolo/op_args.h.
//
// Callback contract: if an *_async call returns an error, the callback never runs. If it
// returns OK, the callback runs exactly once, on kolo's background thread, never under a kolo
// lock; it may enqueue further ops (async forms only). It receives OK when the result is in
// the output buffer, or the error that ended the op (kMismatch: ranks disagreed; kShutdown: a
// rank shut down first; kAborted, kUnavailable, kDeadlineExceeded: the job failed).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kolo/handle.h"
#include "kolo/op_args.h"
#include "kolo/options.h"
#include "kolo/status.h"
#include "kolo/types.h"
#include "kolo/version.h"

namespace kolo {

// ---- Process sets (README, "Process sets"; Horovod >= 0.23) ----
// A process set is a subset of the ranks that run collectives among themselves: set 0 is the
// global set (every rank); add_process_set returns the id of a new one. Every op enqueued from
// a thread runs in that thread's current process set, which a ProcessSetScope sets for its
// lifetime (scopes nest; the default is 0):
//   { kolo::ProcessSetScope in_set(id);  rt.Allreduce("grad", in, out); }
// Within a set, its members in ascending order of their job ranks are its ranks 0, 1, ...:
// alltoall splits, the allgather order and reducescatter parts follow them. Broadcast roots and
// join's last rank are job ranks, as in Horovod (a root outside the set fails at enqueue).
// Names are scoped per set (the same
// name may be in flight in two sets at once); messages and the timeline show a set's op as
// "<name> [process set <id>]". Only the set's members may submit to it (others fail at enqueue);
// its ops run concurrently with other sets' without deadlock. CPU tensors only.
class ProcessSetScope {
 public:
  explicit ProcessSetScope(int process_set);
  ~ProcessSetScope();  // restores the thread's previous set
  ProcessSetScope(const ProcessSetScope&) = delete;
  ProcessSetScope& operator=(const ProcessSetScope&) = delete;

 private:
  int previous_;
};

class RuntimeImpl;
namespace internal {
class RuntimeAccess;  // kolo's own tools (runtime/raw_data_plane.h); not an API
}  // namespace internal

// All per-rank state of kolo: tensor queue, background thread, control stream, data plane,
// and (in rank 0) the controller. Several Runtimes may live in one process, one per rank.
class Runtime {
 public:
  // Joins the job described by `options`. Blocks until every rank has connected to the
  // controller and the data plane is up, or options.start_timeout_seconds pass.
  static StatusOr<std::unique_ptr<Runtime>> Create(const Options& options);

  // Shuts down if Shutdown() was not called. Destroying a Runtime from its own callback is a
  // programmer error and aborts the process.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Leaves the job: no new ops are accepted; ops this rank already submitted still run if
  // every rank submits them, and fail with kShutdown otherwise. Waits (at most
  // options.timeout_seconds, then kDeadlineExceeded) until every rank has called Shutdown(),
  // so that rank 0's controller outlives its peers. After a job-fatal error, returns that
  // error at once. Later calls return OK and do nothing. Not from a callback.
  Status Shutdown();

  int rank() const;
  int size() const;
  int local_rank() const;  // index among the ranks on this host
  int local_size() const;  // number of ranks on this host
  int cross_rank() const;  // index of this host among hosts (by lowest rank)
  int cross_size() const;  // number of hosts

  // Reduces `input` across all ranks into `output` (the same dtype, shape and device).
  // In-place when input.data == output.data. `name` identifies the op across ranks: every
  // rank must submit the same name with the same dtype, shape and options; a name may have
  // only one op in flight at a time on a rank.
  Status AllreduceAsync(const std::string& name, const TensorView& input, const TensorView& output,
                        const AllreduceOptions& options, Callback callback);
  // Blocking form: enqueues and waits for the callback.
  Status Allreduce(const std::string& name, const TensorView& input, const TensorView& output,
                   const AllreduceOptions& options = {});

  // Concatenates every rank's `input` along dimension 0, in rank order, into memory from
  // `allocate` (shape [sum of the ranks' first dimensions, the other dimensions...]). The
  // first dimension may differ per rank; the others, the dtype and the device must agree. A
  // scalar input fails at enqueue. Consecutive allgathers of one dtype fuse.
  Status AllgatherAsync(const std::string& name, const TensorView& input, Allocator allocate,
                        Callback callback);
  Status Allgather(const std::string& name, const TensorView& input, Allocator allocate);

  // Allreduces several tensors as one: they are submitted together and always travel in one
  // fused transfer per dtype, whatever KOLO_FUSION_THRESHOLD says (members of different
  // dtypes are fine, as in Horovod). All must be on one device; names must be distinct;
  // `inputs` and `outputs` pair up. `callback` runs once,
  // after every tensor completed, with the first failure if any.
  Status GroupedAllreduceAsync(const std::vector<std::string>& names,
                               const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs,
                               const AllreduceOptions& options, Callback callback);
  Status GroupedAllreduce(const std::vector<std::string>& names,
                          const std::vector<TensorView>& inputs,
                          const std::vector<TensorView>& outputs,
                          const AllreduceOptions& options = {});

  // Allgathers several tensors as one, as GroupedAllreduce does: each member as AllgatherAsync
  // with its own allocator (`allocators[i]` provides member i's output), one device for all;
  // always one fused transfer per dtype, one callback.
  Status GroupedAllgatherAsync(const std::vector<std::string>& names,
                               const std::vector<TensorView>& inputs,
                               std::vector<Allocator> allocators, Callback callback);
  Status GroupedAllgather(const std::vector<std::string>& names,
                          const std::vector<TensorView>& inputs, std::vector<Allocator> allocators);

  // Reducescatters several tensors as one, as GroupedAllreduce does: each member as
  // ReducescatterAsync (`outputs[i]` holds this rank's part of `inputs[i]`), one device for
  // all; always one fused transfer per dtype, one callback.
  Status GroupedReducescatterAsync(const std::vector<std::string>& names,
                                   const std::vector<TensorView>& inputs,
                                   const std::vector<TensorView>& outputs,
                                   const AllreduceOptions& options, Callback callback);
  Status GroupedReducescatter(const std::vector<std::string>& names,
                              const std::vector<TensorView>& inputs,
                              const std::vector<TensorView>& outputs,
                              const AllreduceOptions& options = {});

  // Sends rows of `input` (dimension 0) to every rank: splits[d] rows to rank d, in order
  // (empty splits: rows / size each, which must divide). Receives the rows every rank sends
  // this one, concatenated in rank order, into memory from `allocate`; `received_splits`
  // (may be null; must outlive the callback) is set to the rows received from each rank
  // before the callback runs. The other dimensions, dtype and device must agree. Never fused.
  Status AlltoallAsync(const std::string& name, const TensorView& input,
                       const std::vector<int64_t>& splits, Allocator allocate,
                       std::vector<int64_t>* received_splits, Callback callback);
  Status Alltoall(const std::string& name, const TensorView& input,
                  const std::vector<int64_t>& splits, Allocator allocate,
                  std::vector<int64_t>* received_splits = nullptr);

  // Reduces `input` across all ranks and leaves rank i only its part of dimension 0 in
  // `output`: rows / size rows each, the first rows % size ranks one more (see
  // ReducescatterShape). Every rank passes the same shape and options; the input is not
  // modified. Any reduce op; average divides once. A scalar input fails at enqueue.
  Status ReducescatterAsync(const std::string& name, const TensorView& input,
                            const TensorView& output, const AllreduceOptions& options,
                            Callback callback);
  Status Reducescatter(const std::string& name, const TensorView& input, const TensorView& output,
                       const AllreduceOptions& options = {});

  // Copies `tensor` of rank `root` into `tensor` of every other rank, in place. Every rank
  // passes the same name, root, dtype and shape. Pipelined along a chain of ranks, so a large
  // tensor costs about one transfer. A root outside [0, size) fails at enqueue.
  Status BroadcastAsync(const std::string& name, const TensorView& tensor, int root,
                        Callback callback);
  Status Broadcast(const std::string& name, const TensorView& tensor, int root);
  // Out of place: the root's `input` lands in `output` on every rank, the root's included.
  // Every rank passes an input and an output of the same dtype, element count and device
  // (only the root's input is read; no input is written). input.data == output.data is the
  // in-place form above.
  Status BroadcastAsync(const std::string& name, const TensorView& input, const TensorView& output,
                        int root, Callback callback);
  Status Broadcast(const std::string& name, const TensorView& input, const TensorView& output,
                   int root);

  // For a rank that has run out of data: it keeps taking part, contributing zeros to every
  // allreduce the other ranks still submit (the identity of sum and average; min, max and
  // product see a 0), until every rank has joined. Allgather, alltoall, broadcast,
  // reducescatter and barrier fail while any rank has joined. `last_rank` (may be null;
  // must outlive the callback) is set to the last rank to join before the callback runs:
  // the last whose join reached the controller, so of joins made less than about a
  // millisecond apart any may be reported.
  Status JoinAsync(int* last_rank, Callback callback);
  // Blocking form: returns the last rank to join.
  StatusOr<int> Join();

  // Completes once every rank has called it. One barrier may be in flight per rank.
  Status BarrierAsync(Callback callback);
  Status Barrier();

  // The async forms without a callback: each returns a Handle (kolo/handle.h) to poll() or
  // synchronize() instead, or the enqueue error (then no op was queued). Waiting on a handle
  // from a callback fails with kFailedPrecondition. No allocation beyond the op's own once
  // kolo's small pool of handle states is warm.
  StatusOr<Handle> AllreduceAsync(const std::string& name, const TensorView& input,
                                  const TensorView& output, const AllreduceOptions& options = {});
  // AllreduceAsync for a caller about to wait for the op: the calling thread runs it itself
  // when it can, as the blocking Allreduce does (up to KOLO_WAIT_SPIN_US), instead of handing
  // it to kolo's thread, and returns its Handle, complete or not (poll()); synchronize() waits
  // for the rest. For a wait that must stay interruptible (kolo.torch's allreduce_, Ctrl-C).
  StatusOr<Handle> AllreduceAsyncDriven(const std::string& name, const TensorView& input,
                                        const TensorView& output,
                                        const AllreduceOptions& options = {});
  StatusOr<Handle> AllgatherAsync(const std::string& name, const TensorView& input,
                                  Allocator allocate);
  StatusOr<Handle> GroupedAllreduceAsync(const std::vector<std::string>& names,
                                         const std::vector<TensorView>& inputs,
                                         const std::vector<TensorView>& outputs,
                                         const AllreduceOptions& options = {});
  StatusOr<Handle> GroupedAllgatherAsync(const std::vector<std::string>& names,
                                         const std::vector<TensorView>& inputs,
                                         std::vector<Allocator> allocators);
  StatusOr<Handle> GroupedReducescatterAsync(const std::vector<std::string>& names,
                                             const std::vector<TensorView>& inputs,
                                             const std::vector<TensorView>& outputs,
                                             const AllreduceOptions& options = {});
  StatusOr<Handle> AlltoallAsync(const std::string& name, const TensorView& input,
                                 const std::vector<int64_t>& splits, Allocator allocate,
                                 std::vector<int64_t>* received_splits = nullptr);
  StatusOr<Handle> ReducescatterAsync(const std::string& name, const TensorView& input,
                                      const TensorView& output,
                                      const AllreduceOptions& options = {});
  StatusOr<Handle> BroadcastAsync(const std::string& name, const TensorView& tensor, int root);
  StatusOr<Handle> BroadcastAsync(const std::string& name, const TensorView& input,
                                  const TensorView& output, int root);
  StatusOr<Handle> JoinAsync(int* last_rank);
  StatusOr<Handle> BarrierAsync();

  // Process sets. AddProcessSet is collective over every rank of the job: each calls it with
  // the same ranks (in any order; duplicates and ranks outside [0, size) fail at enqueue) and
  // gets the same new id, once every rank has called it (ids count up from 1, never reused;
  // KOLO_PROCESS_SETS sets are made at init in their order, so they are 1, 2, ...). Ranks that
  // disagree on the members all fail with kMismatch. One call at a time per rank.
  StatusOr<int> AddProcessSet(const std::vector<int>& ranks);
  Status AddProcessSetAsync(const std::vector<int>& ranks, int* id, Callback callback);
  // Collective over every rank as well. Fails with kFailedPrecondition on every rank while any
  // member has an op of the set in flight that not all members submitted (the message names
  // it); while the removal is in flight, new ops in the set fail at enqueue, and afterwards
  // the id is refused at enqueue. Set 0 cannot be removed.
  Status RemoveProcessSet(int process_set);
  Status RemoveProcessSetAsync(int process_set, Callback callback);
  // This rank's rank within the set and the set's size; -1 when this rank is not in the set
  // (rank) or the set does not exist (both). The set's ranks ascending; empty if none.
  int ProcessSetRank(int process_set) const;
  int ProcessSetSize(int process_set) const;
  std::vector<int> ProcessSetRanks(int process_set) const;

  // Ends the job on every rank, as a lost rank would, for an application that gives up on
  // it (torch.distributed's backend when a wait() timed out: no rank may go on as if the op
  // had or had not happened). The controller aborts the job with "rank R: <reason>", followed
  // by "; at the abort, rank 1 has not submitted 'x' (waiting 2 s)" for every op some ranks
  // had announced and others not; every pending and later op of every rank fails with
  // kAborted and that text (this rank's own within min(KOLO_TIMEOUT_SECONDS / 4, 1 s) of its
  // next background pass, with its own reason if the verdict does not come by then). Returns
  // at once, without waiting for that: wait on an op to see it fail. OK when the job had
  // already ended; InvalidArgument for an empty reason. Any thread, callbacks included.
  Status AbortJob(const std::string& reason);

  // Starts writing this rank's timeline to `path` with ".rank<r>" inserted before the
  // extension (docs/TIMELINE.md); KOLO_TIMELINE does the same at init. Ops already in flight
  // are not traced. `mark_cycles` (Horovod's argument; without it, KOLO_TIMELINE_MARK_CYCLES)
  // records a CYCLE instant per batch the controller plans (rank 0's file). When the timeline
  // is already on with the same `path`, it goes on in the same file and only `mark_cycles`
  // applies; fails if it is on with another path or the file cannot be created. Blocks only to
  // create the file; a writer thread does the rest of the I/O.
  Status StartTimeline(const std::string& path);
  Status StartTimeline(const std::string& path, bool mark_cycles);
  // Flushes and closes the timeline file (valid JSON afterwards). OK if none is open. Waits
  // (at most options.timeout_seconds) for the background thread to finish the response in
  // hand, so every op that completed before the call is in the file. Not from a callback.
  Status StopTimeline();

 private:
  explicit Runtime(std::unique_ptr<RuntimeImpl> impl);
  // Enqueues through `enqueue` (a Status(Callback) callable) with a callback that wakes this
  // thread, and waits for it; `what()` names the op in an error. Defined in runtime.cc, the
  // only place that calls it: a template, so that a small op's call allocates neither its
  // name nor a std::function.
  template <typename What, typename Enqueue>
  Status Blocking(const What& what, const Enqueue& enqueue);
  std::unique_ptr<RuntimeImpl> impl_;
  friend class internal::RuntimeAccess;
};

// ---- Process-wide default runtime: the free functions most training scripts use. ----

// Reads Options::FromEnvironment() and creates the default runtime. Fails if one exists, and
// with kFailedPrecondition if the library's major.minor version differs from the headers the
// caller was compiled with (KOLO_VERSION_* in kolo/version.h): both are inline so that the
// caller's KOLO_VERSION_NUMBER reaches the library.
inline Status init();
inline Status init(const Options& options);
// What init() calls, with the caller's KOLO_VERSION_NUMBER. For bindings that cannot use the
// inline forms: pass the version of the API you were written against.
Status init_for_version(int header_version);
Status init_for_version(int header_version, const Options& options);
// The library's own version, "major.minor.patch" (KOLO_VERSION_STRING is the headers').
const char* version();
// Shuts the default runtime down and destroys it. init() may be called again afterwards.
Status shutdown();
bool is_initialized();

// Identity of the default runtime; -1 when not initialized.
int rank();
int size();
int local_rank();
int local_size();
int cross_rank();
int cross_size();

Status allreduce_async(const std::string& name, const TensorView& input, const TensorView& output,
                       const AllreduceOptions& options, Callback callback);
Status allreduce(const std::string& name, const TensorView& input, const TensorView& output,
                 const AllreduceOptions& options = {});

// The shape of rank `rank`'s part of a reducescatter of `input_shape` over `size` ranks
// (a scalar, which reducescatter refuses, counts as shape [1] here).
std::vector<int64_t> ReducescatterShape(const std::vector<int64_t>& input_shape, int rank,
                                        int size);

// Grouped allreduce, allgather, alltoall, reducescatter, broadcast and barrier of the default
// runtime (see Runtime).
Status grouped_allreduce_async(const std::vector<std::string>& names,
                               const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs,
                               const AllreduceOptions& options, Callback callback);
Status grouped_allreduce(const std::vector<std::string>& names,
                         const std::vector<TensorView>& inputs,
                         const std::vector<TensorView>& outputs,
                         const AllreduceOptions& options = {});
Status grouped_allgather_async(const std::vector<std::string>& names,
                               const std::vector<TensorView>& inputs,
                               std::vector<Allocator> allocators, Callback callback);
Status grouped_allgather(const std::vector<std::string>& names,
                         const std::vector<TensorView>& inputs, std::vector<Allocator> allocators);
Status grouped_reducescatter_async(const std::vector<std::string>& names,
                                   const std::vector<TensorView>& inputs,
                                   const std::vector<TensorView>& outputs,
                                   const AllreduceOptions& options, Callback callback);
Status grouped_reducescatter(const std::vector<std::string>& names,
                             const std::vector<TensorView>& inputs,
                             const std::vector<TensorView>& outputs,
                             const AllreduceOptions& options = {});
Status alltoall_async(const std::string& name, const TensorView& input,
                      const std::vector<int64_t>& splits, Allocator allocate,
                      std::vector<int64_t>* received_splits, Callback callback);
Status alltoall(const std::string& name, const TensorView& input,
                const std::vector<int64_t>& splits, Allocator allocate,
                std::vector<int64_t>* received_splits = nullptr);
Status reducescatter_async(const std::string& name, const TensorView& input,
                           const TensorView& output, const AllreduceOptions& options,
                           Callback callback);
Status reducescatter(const std::string& name, const TensorView& input, const TensorView& output,
                     const AllreduceOptions& options = {});
Status allgather_async(const std::string& name, const TensorView& input, Allocator allocate,
                       Callback callback);
Status allgather(const std::string& name, const TensorView& input, Allocator allocate);
Status broadcast_async(const std::string& name, const TensorView& tensor, int root,
                       Callback callback);
Status broadcast(const std::string& name, const TensorView& tensor, int root);
Status broadcast_async(const std::string& name, const TensorView& input, const TensorView& output,
                       int root, Callback callback);
Status broadcast(const std::string& name, const TensorView& input, const TensorView& output,
                 int root);
Status join_async(int* last_rank, Callback callback);
StatusOr<int> join();
Status barrier_async(Callback callback);
Status barrier();

// The default runtime's async forms returning a Handle (see Runtime): Horovod's
//   kolo::StatusOr<kolo::Handle> h = kolo::allreduce_async("grad", in, out);
//   ... kolo::poll(*h) ... kolo::synchronize(*h);
StatusOr<Handle> allreduce_async(const std::string& name, const TensorView& input,
                                 const TensorView& output, const AllreduceOptions& options = {});
StatusOr<Handle> allreduce_async_driven(const std::string& name, const TensorView& input,
                                        const TensorView& output,
                                        const AllreduceOptions& options = {});
// For bindings that need both a callback and a Handle for one op of the default runtime (the
// torch.distributed backend: a future completed from the callback, a wait on the handle):
// calls `enqueue`, an *_async call of the default runtime taking a Callback, with a callback
// that runs `callback` and then completes the returned Handle, so a wait on the handle sees
// everything `callback` did. With `drive`, the caller is about to wait for the op: the calling
// thread runs it itself when it can, as the blocking forms do (up to KOLO_WAIT_SPIN_US), before
// this returns, complete or not; from a kolo callback it is a plain enqueue. Returns enqueue's
// error, and then `callback` never runs.
StatusOr<Handle> enqueue_tracked(const std::function<Status(Callback)>& enqueue, Callback callback,
                                 bool drive);
StatusOr<Handle> allgather_async(const std::string& name, const TensorView& input,
                                 Allocator allocate);
StatusOr<Handle> grouped_allreduce_async(const std::vector<std::string>& names,
                                         const std::vector<TensorView>& inputs,
                                         const std::vector<TensorView>& outputs,
                                         const AllreduceOptions& options = {});
StatusOr<Handle> grouped_allgather_async(const std::vector<std::string>& names,
                                         const std::vector<TensorView>& inputs,
                                         std::vector<Allocator> allocators);
StatusOr<Handle> grouped_reducescatter_async(const std::vector<std::string>& names,
                                             const std::vector<TensorView>& inputs,
                                             const std::vector<TensorView>& outputs,
                                             const AllreduceOptions& options = {});
StatusOr<Handle> alltoall_async(const std::string& name, const TensorView& input,
                                const std::vector<int64_t>& splits, Allocator allocate,
                                std::vector<int64_t>* received_splits = nullptr);
StatusOr<Handle> reducescatter_async(const std::string& name, const TensorView& input,
                                     const TensorView& output,
                                     const AllreduceOptions& options = {});
StatusOr<Handle> broadcast_async(const std::string& name, const TensorView& tensor, int root);
StatusOr<Handle> broadcast_async(const std::string& name, const TensorView& input,
                                 const TensorView& output, int root);
StatusOr<Handle> join_async(int* last_rank);
StatusOr<Handle> barrier_async();

// Process sets of the default runtime (see Runtime and ProcessSetScope).
StatusOr<int> add_process_set(const std::vector<int>& ranks);
Status remove_process_set(int process_set);
// add_process_set for a caller that bounds its own wait: `*id` (must outlive the op) is set
// before the handle completes.
StatusOr<Handle> add_process_set_async(const std::vector<int>& ranks, int* id);
// remove_process_set for a caller that bounds its own wait.
StatusOr<Handle> remove_process_set_async(int process_set);
int process_set_rank(int process_set);
int process_set_size(int process_set);
std::vector<int> process_set_ranks(int process_set);

// Runtime::AbortJob on the default runtime.
Status abort_job(const std::string& reason);

// Timeline of the default runtime (see Runtime::StartTimeline).
Status start_timeline(const std::string& path);
Status start_timeline(const std::string& path, bool mark_cycles);
Status stop_timeline();

inline Status init() {
  return init_for_version(KOLO_VERSION_NUMBER);
}
inline Status init(const Options& options) {
  return init_for_version(KOLO_VERSION_NUMBER, options);
}

}  // namespace kolo
