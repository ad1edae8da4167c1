// RoundDriver with the real FastPath, ResponseRunner and ControllerSession of two ranks whose
// round messages travel through memory, driven step by step on the test's thread under a
// manual clock: what runs, in which order, what goes to the controller, and the faults.
#include "core/loop/round_driver.h"

#include <catch2/catch.hpp>
#include <deque>
#include <memory>
#include <vector>

#include "tests/support/memory_control_channel.h"

using namespace kolo;
using namespace std::chrono_literals;

namespace {

// The round messages of a job in memory: one mailbox per rank, delivered at the next Poll.
struct Mailboxes {
  explicit Mailboxes(int size) : boxes(size), closed(size, false) {}
  std::vector<std::deque<std::pair<int, RoundMessage>>> boxes;
  std::vector<bool> closed;
};

class MemoryLane final : public RoundLane {
 public:
  MemoryLane(int rank, Mailboxes* mail)
      : rank_(rank), mail_(mail), reported_(mail->closed.size(), false) {}
  Status SendToAll(const RoundMessage& message) override {
    for (int peer = 0; peer < static_cast<int>(mail_->boxes.size()); ++peer) {
      if (peer != rank_ && !mail_->closed[peer]) mail_->boxes[peer].emplace_back(rank_, message);
    }
    return Status::Ok();
  }
  Status SendTo(int peer, const RoundMessage& message) override {
    if (!mail_->closed[peer]) mail_->boxes[peer].emplace_back(rank_, message);
    return Status::Ok();
  }
  Status Poll(std::vector<std::pair<int, RoundMessage>>* out, std::vector<int>* closed) override {
    auto& box = mail_->boxes[rank_];
    while (!box.empty()) {
      out->push_back(std::move(box.front()));
      box.pop_front();
    }
    for (int peer = 0; peer < static_cast<int>(reported_.size()); ++peer) {
      if (mail_->closed[peer] && !reported_[peer]) {
        reported_[peer] = true;
        closed->push_back(peer);
      }
    }
    return Status::Ok();
  }
  std::vector<int> fds() const override { return {}; }

 private:
  const int rank_;
  Mailboxes* const mail_;
  std::vector<bool> reported_;
};

// Runs every response as a one-rank copy and records it.
class RecordingRoundExecutor final : public Executor {
 public:
  Status Execute(const Response& response, const std::vector<TensorEntry*>&,
                 PhaseObserver*) override {
    ran.push_back(response);
    return Status::Ok();
  }
  std::vector<Response> ran;
};

// One rank: its queue, runner, session and driver (which owns the fast path).
class Rank {
 public:
  Rank(int rank, int size, Mailboxes* mail, const Clock* clock)
      : logger_(MakeLogger(rank, "loop", spdlog::level::off)),
        queue_(&wakeup_),
        lane_(rank, mail),
        completer_(&queue_, nullptr, clock, logger_),
        async_(&executor, &completer_, nullptr, &wakeup_, clock, 30, logger_),
        runner_(ResponseRunner::Config{}, &queue_, &executor, &completer_, &async_, nullptr, clock,
                size, /*fast_path=*/true),
        session_(ControllerSession::Config{30, nullptr}, &channel, clock),
        driver(Configured(&options_, rank, size), nullptr, nullptr, &lane_, &runner_, &session_,
               &wakeup_, clock, logger_, false, BetweenPolls::kYield) {}

  // Enqueues an allreduce of 4 floats named `name` and hands it to the driver as the loop
  // does; true if the fast path took it.
  bool Submit(const std::string& name, Clock::TimePoint now) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta.name = name;
    entry->meta.shape = {4};
    entry->input = {data_.data(), DataType::kFloat32, {4}, Device::Cpu()};
    entry->output = entry->input;
    entry->callback = [this, name](const Status& s) { completed.emplace_back(name, s); };
    TensorEntry* raw = entry.get();
    REQUIRE(queue_.Enqueue(std::move(entry)).ok());
    const Request request = runner_.cache().RequestFor(*raw);
    if (driver.Take(raw, request.cache_id, now)) return true;
    WorkerMessage batch;  // as the loop announces it
    batch.requests.push_back(request);
    channel.sent.push_back(batch);
    return false;
  }
  // The controller's response reaches this rank.
  void Receive(const Response& response) { REQUIRE(driver.Receive(response).ok()); }

  testing::MemoryControlChannel channel;
  RecordingRoundExecutor executor;
  std::vector<std::pair<std::string, Status>> completed;

 private:
  static const Options& Configured(Options* options, int rank, int size) {
    options->rank = rank;
    options->size = size;
    return *options;
  }

  Options options_;  // the defaults: 64 MiB fusion, a patience of 1 s, a timeout of 30 s
  const Logger logger_;
  std::vector<float> data_ = std::vector<float>(4, 1.0f);
  Wakeup wakeup_;
  TensorQueue queue_;
  MemoryLane lane_;
  OpCompleter completer_;
  AsyncOps async_;
  ResponseRunner runner_;
  ControllerSession session_;

 public:
  RoundDriver driver;
};

Response Learning(uint64_t seq, const std::string& name, uint32_t id) {
  Response r;
  r.seq = seq;
  r.names = {name};
  r.cache_ids = {id};
  r.num_elements = {4};
  return r;
}

class Job {
 public:
  explicit Job(int size) : mail_(size) {
    for (int r = 0; r < size; ++r)
      ranks_.push_back(std::make_unique<Rank>(r, size, &mail_, &clock));
  }
  Rank& at(int r) { return *ranks_[r]; }
  // Steps every rank (except `silent` ones) until none makes progress; no step may fault.
  void Settle(int silent = -1) {
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        if (r == silent) continue;
        const RoundDriver::Step step = at(r).driver.StepOnce(nullptr);
        REQUIRE(step.fault.ok());
        moved = moved || step.progress;
      }
    }
  }
  void Close(int r) { mail_.closed[r] = true; }
  // `name` goes to the controller from every rank, whose response assigns it cache id `id`.
  void Cache(const std::string& name, uint32_t id) {
    for (auto& rank : ranks_) {
      CHECK_FALSE(rank->Submit(name, clock.Now()));
      rank->Receive(Learning(1, name, id));
    }
    Settle();
  }
  ManualClock clock;

 private:
  Mailboxes mail_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace

TEST_CASE(
    "Ranks run a controller response where their rounds put it, then cached allreduces "
    "without the controller",
    "[core][loop][fastpath]") {
  Job job(2);
  // 'w' goes to the controller the first time; its response assigns cache id 5.
  for (int r = 0; r < 2; ++r) CHECK_FALSE(job.at(r).Submit("w", job.clock.Now()));
  for (int r = 0; r < 2; ++r) job.at(r).Receive(Learning(1, "w", 5));
  job.Settle();
  for (int r = 0; r < 2; ++r) {
    REQUIRE(job.at(r).executor.ran.size() == 1);
    CHECK(job.at(r).executor.ran[0].seq == 1);
    REQUIRE(job.at(r).completed.size() == 1);
    CHECK(job.at(r).completed[0].second.ok());
  }
  // The next 'w' waits for a round instead, and runs once every rank has it.
  CHECK(job.at(0).Submit("w", job.clock.Now()));
  job.Settle();
  CHECK(job.at(0).executor.ran.size() == 1);
  CHECK(job.at(1).Submit("w", job.clock.Now()));
  job.Settle();
  for (int r = 0; r < 2; ++r) {
    REQUIRE(job.at(r).executor.ran.size() == 2);
    const Response& fast = job.at(r).executor.ran[1];
    CHECK(fast.seq == 0);
    CHECK(fast.fast_round != 0);
    CHECK(fast.names == std::vector<std::string>{"w"});
    CHECK(job.at(r).completed.size() == 2);
    CHECK(job.at(r).channel.requests().size() == 1);  // only the first 'w' went to the controller
  }
}

TEST_CASE(
    "A cached allreduce whose metadata changed sends the peers' waiting copies to the "
    "controller",
    "[core][loop][fastpath]") {
  Job job(2);
  job.Cache("w", 5);
  CHECK(job.at(0).Submit("w", job.clock.Now()));  // rank 0 waits for a round with id 5
  job.Settle();
  // Rank 1's 'w' has another shape now: it goes in full, and rank 0's copy follows it there.
  auto& rank1 = job.at(1);
  rank1.channel.sent.clear();
  TensorEntry changed;
  changed.meta.name = "w";
  changed.meta.shape = {8};
  CHECK_FALSE(rank1.driver.Take(&changed, /*cache_id=*/0, job.clock.Now()));
  job.Settle();
  const std::vector<Request> sent0 = job.at(0).channel.requests();
  REQUIRE(sent0.size() == 2);
  CHECK(sent0[1].cache_id == 5);  // by id: the controller names the mismatch
}

TEST_CASE("A round a peer can no longer answer is a fault in the collective",
          "[core][loop][fastpath]") {
  Job job(2);
  job.Cache("w", 5);
  job.Close(1);
  CHECK(job.at(0).Submit("w", job.clock.Now()));
  const RoundDriver::Step step = job.at(0).driver.StepOnce(nullptr);
  REQUIRE(step.fault.ok());
  const Fault late = job.at(0).driver.CheckDeadlines();
  CHECK(late.origin() == Fault::Origin::kInCollective);
  CHECK(late.why().code() == StatusCode::kUnavailable);
  CHECK(late.why().message() ==
        "fast path: rank(s) 1 closed the connection before answering round 2");
}
