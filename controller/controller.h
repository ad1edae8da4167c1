// Controller: kolo's sequencer (DESIGN.md §1–2, §5), hosted in rank 0's process. The gRPC
// service in transport/ calls it as a ControllerHandler; it admits ranks, negotiates tensors
// (Negotiator), and sends every decision to all ranks through the ControllerOutbox, in one
// order. It decides; it never moves tensor bytes.
//
// Threading: handler methods may be called concurrently from transport threads. One mutex
// guards all decision state. Start() runs one sequencer thread that plans ready tensors when
// their fusion window (one cycle time) closes and runs the stall inspector when a check is due;
// Stop() or the destructor joins it. Without Start(), RunCycle() and CheckStalls() are the same
// steps, for tests with a ManualClock. Trace events are recorded under the lock (TraceSink
// never blocks).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "controller/negotiator.h"
#include "controller/rendezvous.h"
#include "controller/stall_inspector.h"
#include "core/clock.h"
#include "core/config/config_table.h"
#include "core/controller_link.h"
#include "core/logging.h"
#include "core/messages.h"
#include "core/mutex.h"
#include "core/trace_sink.h"
#include "kolo/status.h"

namespace kolo::controller {

class Controller final : public ControllerHandler {
 public:
  // The runtime fills it from Options; the KOLO_ fields default to Options' defaults (the
  // config table's) and must lie in the table's ranges.
  struct Config {
    int size = 1;                                                              // ranks in the job
    int64_t fusion_threshold_bytes = DefaultOptions().fusion_threshold_bytes;  // KOLO_FUSION_…
    double cycle_time_ms = DefaultOptions().cycle_time_ms;  // KOLO_CYCLE_TIME_MS: fusion window
    int cache_capacity = DefaultOptions().cache_capacity;   // KOLO_CACHE_CAPACITY; 0: no cache
    // KOLO_STALL_CHECK_SECONDS: warn (rate-limited to once per this period) while a tensor
    // some ranks announced has waited this long for the others. 0 disables.
    double stall_check_seconds = DefaultOptions().stall_check_seconds;
    // KOLO_STALL_SHUTDOWN_SECONDS: abort the job once a tensor has waited this long for the
    // other ranks. 0 disables; independent of stall_check_seconds.
    double stall_shutdown_seconds = DefaultOptions().stall_shutdown_seconds;
    // Where negotiation events go (docs/TIMELINE.md, controller process); null: nowhere.
    // Must outlive the controller. Events are built only while trace->enabled().
    TraceSink* trace = nullptr;
    // KOLO_TIMELINE_MARK_CYCLES: also record a "CYCLE" instant per planned batch (until
    // SetMarkCycles says otherwise).
    bool mark_cycles = false;
    // KOLO_START_TIMEOUT_SECONDS: once this long has passed since construction without every
    // rank's Hello, the sequencer aborts the job, telling the ranks already connected which
    // ranks never arrived. 0: wait forever (tests that drive the controller by hand).
    double start_timeout_seconds = 0;
    // KOLO_TIMEOUT_SECONDS: a rank whose stream closes after at least half this long without
    // a message (workers send a keepalive Ping every quarter of it) is reported as timed out
    // (stopped, or its host or network gone) rather than as dead. 0: unknown, never said.
    double timeout_seconds = 0;

    // InvalidArgument naming the field when a value is out of range.
    Status Validate() const;
  };

  // `config` must be valid (Config::Validate; the process aborts otherwise). `clock` must
  // outlive the controller; `logger` must be non-null.
  Controller(const Config& config, Clock* clock, Logger logger);
  // Stops the sequencer thread if it runs.
  ~Controller() override;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Sets where messages go; call once, before or after the first handler call (the gRPC
  // server that implements the outbox needs the handler first). Messages decided before
  // Attach are queued and sent here, in order. `outbox` must outlive the controller.
  void Attach(ControllerOutbox* outbox);

  // Starts the sequencer thread. Call at most once.
  void Start();
  // Joins the sequencer thread; tensors still inside their fusion window are not planned.
  // Idempotent; does not send anything.
  void Stop();

  // ControllerHandler. Never block on the network.
  Status OnHello(const Hello& hello) override;
  void OnMessage(int rank, const WorkerMessage& message) override;
  void OnStreamClosed(int rank, const Status& why) override;

  // One sequencer step at clock->Now(): if the fusion window of the ready tensors has closed,
  // plans and sends them and returns nullopt; if it is still open, returns when it closes;
  // nullopt when nothing is ready.
  std::optional<Clock::TimePoint> RunCycle();

  // One stall-inspector step at clock->Now(): logs the stall warning or aborts the job
  // (StallInspector) if one is due. Returns when the next check is due; nullopt when nothing
  // is pending, the inspector is disabled, or the job is over. Never blocks on the network.
  std::optional<Clock::TimePoint> CheckStalls();

  // One start-timeout step at clock->Now() (the sequencer thread takes it too): aborts the
  // job, naming the ranks that never said hello, once config.start_timeout_seconds passed.
  // Returns the deadline while it is ahead; nullopt once every rank arrived, the job aborted,
  // or there is no start timeout.
  std::optional<Clock::TimePoint> CheckStart();

  // Whether to record a CYCLE instant per planned batch from now on (start_timeline's
  // mark_cycles). Any thread.
  void SetMarkCycles(bool on) { mark_cycles_.store(on, std::memory_order_relaxed); }

  bool aborted() const;
  std::string abort_reason() const;  // "" unless aborted
  bool shutdown_sent() const;        // every rank sent its notice and got Shutdown
  // After a start that aborted before every rank said hello: the ranks that have not heard
  // the verdict, neither admitted (their stream carried the Abort) nor refused with the
  // abort's reason since. Empty unless the job aborted during the rendezvous. Rank 0 keeps
  // serving until this is empty or its start timeout passed (docs/RELIABILITY.md, scenario 19).
  std::vector<int> RanksNotTold() const;

 private:
  struct Outgoing {
    int rank = -1;  // -1: every rank
    ControllerMessage message;
  };

  void HandleRequestsLocked(int rank, const std::vector<Request>& requests) KOLO_REQUIRES(mu_);
  void HandleShutdownLocked(int rank) KOLO_REQUIRES(mu_);
  // Broadcasts Abort with `reason` unless the job already aborted or shut down.
  void AbortLocked(const std::string& reason) KOLO_REQUIRES(mu_);
  // Why admitted `rank` is lost, its stream having closed with `why`: timed out if it had been
  // silent for half the timeout (a stopped process is closed by keepalive only after the
  // timeout), else the stream's own reason (a dead process closes its socket at once).
  std::string LostReasonLocked(int rank, const Status& why) const KOLO_REQUIRES(mu_);
  // Opens a fusion window if tensors became ready while none were waiting.
  void NoteReadyLocked(int ready_before) KOLO_REQUIRES(mu_);
  // Warns or aborts if a stall check is due at `now`; returns the next check's time.
  std::optional<Clock::TimePoint> CheckStallsLocked(Clock::TimePoint now) KOLO_REQUIRES(mu_);
  // Aborts the job if the start deadline passed before every rank said hello; returns the
  // deadline while it is still ahead, nullopt when there is nothing to wait for.
  std::optional<Clock::TimePoint> CheckStartLocked(Clock::TimePoint now) KOLO_REQUIRES(mu_);
  // Whether negotiation events should be built now (config_.trace set and enabled).
  bool tracing() const { return config_.trace != nullptr && config_.trace->enabled(); }
  // Plans ready tensors into a response batch for every rank if the window closed at `now`
  // (or `force`). Returns false and sets *due to the window's end when it is still open.
  bool PlanIfDueLocked(Clock::TimePoint now, bool force, Clock::TimePoint* due) KOLO_REQUIRES(mu_);
  void QueueLocked(int rank, ControllerMessage message) KOLO_REQUIRES(mu_);
  // Sends queued messages in the order they were decided.
  void Flush() KOLO_EXCLUDES(send_mu_, mu_);
  void SequencerLoop();

  // Constant after construction.
  const Config config_;
  const Clock::TimePoint::duration cycle_;
  // How often the idle sequencer looks for newly pending names when stall checks are on: a
  // quarter of the shorter stall time, so that it never misses one's first check.
  const std::chrono::steady_clock::duration stall_poll_;
  Clock* const clock_;
  const Logger logger_;
  const Clock::TimePoint start_deadline_;  // meaningful when config_.start_timeout_seconds > 0

  std::atomic<bool> mark_cycles_;  // config_.mark_cycles, then SetMarkCycles

  // Serialises Flush so that messages leave in decision order. Taken before mu_, never after.
  Mutex send_mu_;
  ControllerOutbox* outbox_ KOLO_GUARDED_BY(send_mu_) = nullptr;

  mutable Mutex mu_ KOLO_ACQUIRED_AFTER(send_mu_);
  CondVar wake_;  // with mu_: a fusion window opened, or stop_
  Negotiator negotiator_ KOLO_GUARDED_BY(mu_);
  StallInspector stall_inspector_ KOLO_GUARDED_BY(mu_);
  Rendezvous rendezvous_ KOLO_GUARDED_BY(mu_);
  Clock::TimePoint window_start_ KOLO_GUARDED_BY(mu_);   // oldest unplanned readiness
  std::vector<Outgoing> outgoing_ KOLO_GUARDED_BY(mu_);  // decided, not yet sent
  bool aborted_ KOLO_GUARDED_BY(mu_) = false;
  std::string abort_reason_ KOLO_GUARDED_BY(mu_);
  bool shutdown_sent_ KOLO_GUARDED_BY(mu_) = false;
  std::vector<Clock::TimePoint> last_heard_ KOLO_GUARDED_BY(mu_);  // per rank, its last message
  std::vector<bool> refused_after_abort_ KOLO_GUARDED_BY(mu_);     // per rank: told the verdict
  bool stop_ KOLO_GUARDED_BY(mu_) = false;

  // Started by Start(), joined by Stop(); touched only by the thread that owns the controller.
  std::thread sequencer_;
};

}  // namespace kolo::controller
