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
#include "controller/postbox.h"
#include "controller/rendezvous.h"
#include "controller/stall_inspector.h"
#include "core/autotuner.h"
#include "core/clock.h"
#include "core/controller_link.h"
#include "core/logging.h"
#include "core/messages.h"
#include "core/mutex.h"
#include "core/trace_sink.h"
#include "kolo/options.h"
#include "kolo/status.h"

namespace kolo::controller {

class Controller final : public ControllerHandler {
 public:
  // `options` is the job's configuration (Options::Validate'd, as the runtime does), of which
  // the controller reads the size, KOLO_FUSION_THRESHOLD, KOLO_CYCLE_TIME_MS (the fusion
  // window), KOLO_CACHE_CAPACITY (0: no cache), KOLO_STALL_CHECK_SECONDS (warn, rate-limited to
  // once per this period, while a tensor some ranks announced waited this long for the
  // others; 0: off), KOLO_STALL_SHUTDOWN_SECONDS (abort the job then; 0: off),
  // KOLO_TIMELINE_MARK_CYCLES (a "CYCLE" instant per planned batch, until SetMarkCycles),
  // KOLO_START_TIMEOUT_SECONDS (once this long passed since construction without every rank's
  // Hello, the sequencer aborts the job naming the ranks that never arrived) and
  // KOLO_TIMEOUT_SECONDS (a rank whose stream closes after at least half this long without a
  // message is reported as timed out, stopped or its host gone, rather than as dead). Tests
  // that drive the controller by hand may set those last two to 0: no start timeout, and the
  // timeout unknown. `options` and `clock` must outlive the controller. `trace`: where
  // negotiation events go (docs/TIMELINE.md, controller process), built only while
  // trace->enabled(); null: nowhere; must outlive the controller. `logger` must be non-null.
  Controller(const Options& options, TraceSink* trace, Clock* clock, Logger logger);
  Controller(Options&&, TraceSink*, Clock*, Logger) = delete;  // it keeps a reference
  // Stops the sequencer thread if it runs.
  ~Controller() override;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Sets where messages go; call once, before or after the first handler call (the gRPC
  // server that implements the outbox needs the handler first). Messages decided before
  // Attach are queued and sent here, in order. `outbox` must outlive the controller.
  void Attach(ControllerOutbox* outbox);

  // With KOLO_AUTOTUNE: the cycle time and the fusion threshold come from `autotuner`
  // (core/autotuner.h; it must outlive the controller), and while it tunes the hierarchical
  // choice, every allreduce response carries its rule (Response::hierarchy_min_bytes). Call
  // before Start.
  void UseAutotuner(const Autotuner* autotuner) { settings_.autotuner = autotuner; }

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
  // job, naming the ranks that never said hello, once KOLO_START_TIMEOUT_SECONDS passed.
  // Returns the deadline while it is ahead; nullopt once every rank arrived, the job aborted,
  // or there is no start timeout.
  std::optional<Clock::TimePoint> CheckStart();

  // Aborts the job's start with `reason` (every rank that said hello, or says it later, fails
  // init() with it) unless every rank has said hello already or the job is over; an elastic
  // job's rank 0 calls it when kolorun's driver says a member of the generation is gone, instead
  // of waiting out KOLO_START_TIMEOUT_SECONDS. Any thread. Returns whether it aborted.
  bool AbortStart(const std::string& reason);

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
  // What the constructor was given and derived from it; constant after Start.
  struct Settings {
    const Options& options;
    TraceSink* trace;
    Clock::TimePoint::duration cycle;
    // How often the idle sequencer looks for newly pending names when stall checks are on: a
    // quarter of the shorter stall time, so that it never misses one's first check.
    std::chrono::steady_clock::duration stall_poll;
    Clock* clock;
    Logger logger;
    Clock::TimePoint start_deadline;       // meaningful when a start timeout is set
    const Autotuner* autotuner = nullptr;  // set before Start; read by the sequencer
    // Whether negotiation events should be built now (trace set and enabled).
    bool tracing() const { return trace != nullptr && trace->enabled(); }
  };
  // How the job ended, if it did.
  struct Verdict {
    bool aborted = false;
    std::string abort_reason;
    bool shutdown_sent = false;
  };
  // What the controller keeps of each rank.
  struct RankRecord {
    Clock::TimePoint last_heard;       // its last message
    bool refused_after_abort = false;  // told the verdict
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
  // Plans ready tensors into a response batch for every rank if the window closed at `now`
  // (or `force`). Returns false and sets *due to the window's end when it is still open.
  bool PlanIfDueLocked(Clock::TimePoint now, bool force, Clock::TimePoint* due) KOLO_REQUIRES(mu_);
  void SequencerLoop();

  Settings settings_;

  std::atomic<bool> mark_cycles_;  // KOLO_TIMELINE_MARK_CYCLES, then SetMarkCycles

  // Decided messages, queued under mu_ in decision order and flushed outside it.
  Postbox postbox_;

  mutable Mutex mu_;
  CondVar wake_;  // with mu_: a fusion window opened, or stop_
  Negotiator negotiator_ KOLO_GUARDED_BY(mu_);
  StallInspector stall_inspector_ KOLO_GUARDED_BY(mu_);
  Rendezvous rendezvous_ KOLO_GUARDED_BY(mu_);
  Clock::TimePoint window_start_ KOLO_GUARDED_BY(mu_);  // oldest unplanned readiness
  Verdict verdict_ KOLO_GUARDED_BY(mu_);
  std::vector<RankRecord> ranks_ KOLO_GUARDED_BY(mu_);  // by rank
  bool stop_ KOLO_GUARDED_BY(mu_) = false;

  // Started by Start(), joined by Stop(); touched only by the thread that owns the controller.
  std::thread sequencer_;
};

}  // namespace kolo::controller
