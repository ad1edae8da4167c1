// GpuExecutor: device tensors through the collective library (NCCL, or its simulator), the GPU
// path's Executor (DESIGN.md §4). Per response, on the background thread, Launch
//   1. sets the rank's device and gets the communicator from the CommProvider;
//   2. makes kolo's own high-priority stream (one, made at the first op) wait on each entry's
//      ready event when Config::ready_event gives one. Without one kolo's stream waits for
//      nothing: the caller must have finished writing the inputs (synchronised its stream)
//      before it enqueued the op;
//   3. copies fused tensors into the device fusion buffer (allocated once, KOLO_FUSION_THRESHOLD
//      bytes; a lone tensor runs in place on its own memory, without a copy), runs the
//      collective, copies the results out, recording a timing event after each phase;
//   4. pushes the op to its CompletionQueue and returns without waiting. The queue's thread
//      runs `done` once the last event completed (with the phases, for the timeline: names
//      MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER, NCCL_BROADCAST, ...).
//
// Op kinds, with what they mean on the CPU path (ops/cpu_executor.h): allreduce (all reduce ops,
// fused or single, in or out of place), broadcast, allgather (each rank's own first dimension),
// reducescatter (SplitRows parts), alltoall (grouped Send/Recv by the split matrix); join and
// barrier complete in stream order with no device work. A CPU entry in a response (a joined
// rank's stand-in) contributes device zeros and its result is dropped.
//
// Scaling: NCCL scales only before the reduction (ncclRedOpCreatePreMulSum), so for sum and
// average the executor folds both factors into one prescale, prescale * postscale, and leaves
// the division of an average to the library (ncclAvg; integers truncate toward zero, as on the
// CPU path). The result equals the CPU path's op(prescale * x) * postscale exactly in real
// arithmetic; in floating point the two round differently (within one rounding of each
// factor). A scale other than 1 with min, max or product, or with an integer dtype, is refused
// (InvalidArgument): it has no premultiplied form and kolo launches no kernels of its own.
//
// Failure: any error while enqueueing makes Launch return it (job-fatal; `done` never runs). A
// device or collective error, or an op past KOLO_TIMEOUT_SECONDS, seen by the completion thread
// aborts the communicator exactly once (releasing kernels that spin on a dead peer), fails that
// op, and holds the ops behind it until Interrupt, which fails them with the root cause (and
// aborts the communicator, if that has not happened yet).
//
// Threading: Launch, Execute and RunsAsync on the background thread only; Interrupt and
// pending() from any thread; `done`, and the observer's OnPhase, on the completion thread.
// Calls on the communicator are serialised by a mutex (one NCCL comm is not thread-safe).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/config/config_table.h"
#include "core/executor.h"
#include "core/logging.h"
#include "core/mutex.h"
#include "ops/gpu/collective_api.h"
#include "ops/gpu/completion_queue.h"
#include "ops/gpu/device_api.h"
#include "ops/gpu/event_pool.h"

namespace kolo::gpu {

class GpuExecutor final : public Executor {
 public:
  // This rank's communicator for `device`, ready for collectives (PollComm said kReady), made
  // the first time it is asked for (the bootstrap lives with the provider, which also owns,
  // and in the end destroys, the comm). Called by Launch on the background thread.
  using CommProvider = std::function<StatusOr<CommHandle>(int device)>;
  // The event after which `entry`'s input is ready on the device, or null: kolo's stream does
  // not wait for it.
  using ReadyEvent = std::function<EventHandle(const TensorEntry& entry)>;

  struct Config {
    int rank = 0;  // in the communicator (the job's rank)
    int size = 1;
    // The device of a response that holds no device tensor of this rank (all its entries are
    // a joined rank's stand-ins) before any op set it; -1: such a response fails.
    int device = -1;
    // KOLO_FUSION_THRESHOLD: the device fusion buffer's size. A fused op that needs more gets a
    // buffer of its own for that op.
    size_t fusion_threshold_bytes = static_cast<size_t>(DefaultOptions().fusion_threshold_bytes);
    CompletionQueue::Config completion;  // KOLO_TIMEOUT_SECONDS, the clock, the poll interval
    ReadyEvent ready_event;              // may be empty: nothing to wait for
  };

  // `device` and `collectives` must outlive the executor.
  GpuExecutor(DeviceApi* device, CollectiveApi* collectives, CommProvider comms,
              const Config& config, Logger logger);
  // Fails what is still pending with a shutdown status (aborting the communicator if any op
  // is), waits for kolo's stream, then frees its stream, events and buffers.
  ~GpuExecutor() override;
  GpuExecutor(const GpuExecutor&) = delete;
  GpuExecutor& operator=(const GpuExecutor&) = delete;

  // Every response this executor is given runs through Launch: the Response does not say on
  // which device its tensors are, so the caller routes device responses here.
  bool RunsAsync(const Response& /*response*/) const override { return true; }
  // Internal error: device ops only launch.
  Status Execute(const Response& response, const std::vector<TensorEntry*>& entries,
                 PhaseObserver* observer) override;
  Status Launch(const Response& response, const std::vector<TensorEntry*>& entries,
                PhaseObserver* observer, Done done) override;
  void Interrupt(const Status& why) override;

  // Ops launched and not completed yet.
  size_t pending() const;

 private:
  // One launched response: what the completion thread needs, and what the op holds until it
  // completed. Background thread while launching, then the completion thread.
  struct Op {
    std::string what;  // "allreduce 'w' and 'b' (2 tensors, 8.0 KiB)"
    std::vector<CompletionQueue::Phase> phases;
    std::vector<EventHandle> events;  // taken from the pool
    EventHandle last = nullptr;       // the latest recorded: completes with the op
    std::vector<void*> buffers;       // device memory of this op alone (Malloc)
    std::vector<std::unique_ptr<TensorEntry>> stand_ins;  // device zeros for CPU entries
  };

  // The device of `entries` (one per rank), kolo's stream on it, and the communicator.
  Status Prepare(const std::vector<TensorEntry*>& entries);
  // Enqueues `response`'s device work, by op kind (gpu_executor_ops.cc).
  Status Enqueue(const Response& response, const std::vector<TensorEntry*>& entries, Op& op);
  Status Allreduce(const Response& response, const std::vector<TensorEntry*>& entries, Op& op);
  Status Broadcast(const Response& response, const std::vector<TensorEntry*>& entries, Op& op);
  Status Allgather(const Response& response, const std::vector<TensorEntry*>& entries, Op& op);
  Status Reducescatter(const Response& response, const std::vector<TensorEntry*>& entries, Op& op);
  Status Alltoall(const Response& response, const std::vector<TensorEntry*>& entries, Op& op);
  // Every rank's block gathered into `blocks` (rank-major; rank r's block of block_bytes[r]
  // at the sum of the ones before): ncclAllGather when every block is the same size, else one
  // ncclBroadcast per rank. `send` is this rank's block; it may lie in `blocks` (in place).
  Status GatherBlocks(const void* send, uint8_t* blocks, const std::vector<size_t>& block_bytes,
                      DataType dtype);
  // The output of `entry` (allgather, alltoall) from its allocator, or, when it gives none, a
  // buffer of `op` whose contents are dropped (the entry fails alone: local_error).
  StatusOr<void*> AllocateOutput(TensorEntry& entry, const std::vector<int64_t>& shape, Op& op);
  // Runs `call` on the communicator, holding its mutex (a group of calls as one).
  Status OnComm(const std::function<Status(CommHandle)>& call);
  // Enqueues device-to-device `copies` (none: nothing) on kolo's stream.
  Status Copy(const std::vector<CopySpan>& copies);
  // A fused op's three phases: `in` into the fusion buffer (MEMCPY_IN_FUSION_BUFFER), the
  // `collective` on it (`phase`), `out` back to the outputs (MEMCPY_OUT_FUSION_BUFFER).
  Status ThroughFusionBuffer(Op& op, const std::vector<CopySpan>& in,
                             const std::vector<CopySpan>& out, const char* phase,
                             const std::function<Status()>& collective);

  // Records `op`'s first event, where its first phase starts.
  Status Begin(Op& op);
  // Records an event after the work enqueued so far: the end of phase `name`.
  Status EndPhase(Op& op, const char* name);
  // Device memory for one op: the fusion buffer when `bytes` fits, else a buffer of `op`.
  StatusOr<uint8_t*> Scratch(size_t bytes, Op& op);
  // Run on the completion thread after `done`: returns the op's events and frees its buffers,
  // or keeps them until the destructor when the device may still use them (the op failed).
  void Release(Op& op);
  // The completion thread's health check between polls: the communicator's async error.
  Status CommHealth();
  // Aborts the communicator the first time; later calls do nothing.
  void AbortComm(const Status& why);

  // Constant after construction.
  DeviceApi* const device_;
  CollectiveApi* const coll_;
  const CommProvider comms_;
  const Config config_;
  const Logger logger_;

  // Background thread only.
  int device_index_ = -1;
  StreamHandle stream_ = nullptr;
  uint8_t* fusion_buffer_ = nullptr;

  // Guards the communicator: Launch enqueues on it, the completion thread polls and aborts it.
  mutable Mutex comm_mu_;
  CommHandle comm_ KOLO_GUARDED_BY(comm_mu_) = nullptr;
  bool aborted_ KOLO_GUARDED_BY(comm_mu_) = false;

  // Events, reused; and what failed ops leave the device, freed last (after the stream).
  EventPool pool_;

  std::unique_ptr<CompletionQueue> queue_;  // last: its thread calls the members above
};

}  // namespace kolo::gpu
