// PeerOps::MonitoredBarrier: gloo's monitored barrier on kolo's point-to-point ops. Every rank
// but 0 sends rank 0 its arrival and posts the receive of rank 0's answer at once; rank 0
// receives every arrival (each bounded by the timeout, all in flight together), then answers
// every rank with the list of ranks that did not arrive, so the ranks that did fail at once
// naming them, and one that comes late learns it as soon as it arrives. Messages follow gloo's
// ("[Rank 0]: Rank 3 failed to pass monitoredBarrier in 1000 ms").
#include <torch/extension.h>

#include <memory>
#include <optional>
#include <utility>

#include "kolo/kolo.h"
#include "kolo/p2p.h"
#include "python/csrc/c10d/kolo_backend.h"
#include "python/csrc/c10d/peer_ops.h"

namespace kolo::torch_ext {

using namespace c10d_args;  // NOLINT: the backend's shared helpers

namespace {

// kolo tags of the group's monitored barriers: above every c10d tag (an int), two a round (the
// arrivals at rank 0, and rank 0's answers).
constexpr int64_t kBarrierTags = int64_t{1} << 40;

// One point-to-point op of the barrier. Its buffer lives until the op completes, also when the
// barrier stops waiting for it (an answer to a rank that never came).
struct Posted {
  StatusOr<Handle> handle = InvalidArgument("not posted");
  std::shared_ptr<std::vector<int32_t>> buffer;
};

Posted PostOne(bool send, int set_peer, int64_t tag, std::vector<int32_t> values,
               const P2pOptions& options) {
  Posted posted;
  posted.buffer = std::make_shared<std::vector<int32_t>>(std::move(values));
  TensorView view;
  view.data = posted.buffer->data();
  view.dtype = DataType::kInt32;
  view.shape = {static_cast<int64_t>(posted.buffer->size())};
  posted.handle = enqueue_tracked(
      [&](Callback done) {
        return send ? kolo::send_async(view, set_peer, tag, options, std::move(done))
                    : kolo::recv_async(view, set_peer, tag, nullptr, options, std::move(done));
      },
      [buffer = posted.buffer](const Status&) {}, /*drive=*/false);
  return posted;
}

// How long the barrier's ops may wait for their peers: an arrival at rank 0 the barrier's
// timeout; an answer twice that and 2 s more, since rank 0 answers only once it waited up to the
// timeout for the arrivals, which may start up to the timeout after a rank posted its receive
// of the answer.
struct Deadlines {
  explicit Deadlines(std::chrono::milliseconds timeout) {
    arrival.timeout_seconds = std::chrono::duration<double>(timeout).count();
    answer.timeout_seconds = 2 * arrival.timeout_seconds + 2;
  }
  P2pOptions arrival;
  P2pOptions answer;
};

// The op's outcome, waiting a little longer than its own deadline, by which kolo ends it.
Status Await(const Posted& posted, const P2pOptions& options) {
  if (!posted.handle.ok()) return posted.handle.status();
  return posted.handle->Synchronize(options.timeout_seconds * 1.1 + 2);
}

// "Rank 3" (one rank, as gloo names the first missing one) or "Ranks 2, 3" (a list, as gloo's
// wait_all_ranks names them, one or more).
std::string RanksText(const std::vector<int>& ranks, bool list) {
  std::string text = list ? "Ranks " : "Rank ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

void PeerOps::MonitoredBarrier(std::chrono::milliseconds timeout, bool wait_all_ranks) {
  const int64_t round = barrier_rounds_.fetch_add(1);
  if (group_.size == 1) return;
  std::optional<pybind11::gil_scoped_release> no_gil;
  if (PyGILState_Check() != 0) no_gil.emplace();
  ProcessSetScope in_set(group_.process_set);
  if (group_.rank == 0) {
    GatherAtRoot(round, timeout, wait_all_ranks);
  } else {
    ArriveAtRoot(round, timeout);
  }
}

void PeerOps::ArriveAtRoot(int64_t round, std::chrono::milliseconds timeout) {
  const std::string where = "monitored_barrier of process group '" + group_.name + "': ";
  const std::string me = "Rank " + std::to_string(group_.rank);
  const int64_t tag = kBarrierTags + 2 * round;
  const Deadlines deadlines(timeout);
  const int root = group_.set_ranks[0];
  const Posted answer =
      PostOne(false, root, tag + 1, std::vector<int32_t>(group_.size), deadlines.answer);
  const Posted arrival = PostOne(true, root, tag, {1}, deadlines.arrival);
  const Status answered = Await(answer, deadlines.answer);
  if (!answered.ok()) {
    Fail(where + me +
         " successfully reached monitoredBarrier, but received errors while waiting for "
         "send/recv from rank 0. Please check rank 0 logs for faulty rank.\n Original "
         "exception: \n" +
         answered.message());
  }
  std::vector<int> missing;
  for (int r = 0; r < group_.size; ++r) {
    if ((*answer.buffer)[static_cast<size_t>(r)] != 0) missing.push_back(r);
  }
  if (!missing.empty()) {
    Fail(where + me + " successfully reached monitoredBarrier, but rank 0 found that " +
         RanksText(missing, missing.size() > 1) + " failed to pass monitoredBarrier in " +
         std::to_string(timeout.count()) + " ms");
  }
  const Status arrived = Await(arrival, deadlines.arrival);  // rank 0 had it before it answered
  if (!arrived.ok()) Fail(where + me + " could not tell rank 0 it arrived: " + arrived.message());
}

void PeerOps::GatherAtRoot(int64_t round, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  const std::string where = "monitored_barrier of process group '" + group_.name + "': ";
  const std::string within =
      " failed to pass monitoredBarrier in " + std::to_string(timeout.count()) + " ms";
  const int64_t tag = kBarrierTags + 2 * round;
  const Deadlines deadlines(timeout);
  std::vector<Posted> arrivals(static_cast<size_t>(group_.size));
  for (int r = 1; r < group_.size; ++r) {
    arrivals[static_cast<size_t>(r)] = PostOne(false, group_.set_ranks[static_cast<size_t>(r)], tag,
                                               std::vector<int32_t>(1), deadlines.arrival);
  }
  std::vector<int> missing;
  std::string first_error;
  std::vector<int32_t> flags(static_cast<size_t>(group_.size), 0);
  for (int r = 1; r < group_.size; ++r) {
    const Status arrived = Await(arrivals[static_cast<size_t>(r)], deadlines.arrival);
    if (arrived.ok()) continue;
    missing.push_back(r);
    flags[static_cast<size_t>(r)] = 1;
    if (first_error.empty()) first_error = arrived.message();
  }
  // Every rank gets the answer, also those that did not arrive: one that comes late learns at
  // once that the barrier failed.
  std::vector<Posted> answers(static_cast<size_t>(group_.size));
  for (int r = 1; r < group_.size; ++r) {
    answers[static_cast<size_t>(r)] =
        PostOne(true, group_.set_ranks[static_cast<size_t>(r)], tag + 1, flags, deadlines.answer);
  }
  if (!missing.empty()) {
    if (wait_all_ranks) Fail(where + "[Rank 0]: " + RanksText(missing, true) + within);
    Fail(where + "[Rank 0]: " + RanksText({missing[0]}, false) + within +
         "\n Original exception: \n" + first_error);
  }
  for (int r = 1; r < group_.size; ++r) {
    const Status answered = Await(answers[static_cast<size_t>(r)], deadlines.answer);
    if (!answered.ok()) {
      Fail(where + "[Rank 0]: rank " + std::to_string(r) +
           " arrived at monitoredBarrier but did not receive rank 0's answer: " +
           answered.message());
    }
  }
}

}  // namespace kolo::torch_ext
