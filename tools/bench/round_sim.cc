// kolo-round-sim: the fast path's rounds (docs/FAST-PATH.md) of N ranks in one process, each
// rank a real RoundAgreement, over a modelled network in which every message takes the same
// latency. Messages travel as the round lanes send them: encoded once per send
// (transport/round_codec.h; a message to every peer once, as TcpRoundLane::SendToAll) and parsed
// by each receiver. For each rank count and pattern it reports the messages and bytes a rank
// sends per round, the sequential hops until the round is complete at every rank (the round's
// time over the latency), and the CPU time per round and rank of the agreement (the calls into
// RoundAgreement) and of the wire format (encoding and parsing), not the simulator's queue nor
// the sockets. A benchmark, not a test: its numbers are the model's.
//
//   kolo-round-sim [--ranks 2,4,...,1024] [--rounds 8] [--ids 161] [--latency-us 25]
//                  [--start all|one] [--max-all-to-all 256]
//
// --start all: every rank has its tensors ready when the round begins (a training step);
// --start one: one rank starts each round and the others join when a message reaches them.
// Threading: single-threaded.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/loop/round_agreement.h"
#include "transport/round_codec.h"

namespace {

using kolo::RoundAgreement;
using kolo::RoundDecision;
using kolo::RoundMessage;
using kolo::RoundPattern;
using kolo::RoundSend;
using Clock = std::chrono::steady_clock;

struct Flags {
  std::vector<int> ranks = {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  int rounds = 8;
  uint32_t ids = 161;  // ResNet-50's gradients
  double latency_us = 25;
  bool start_all = true;
  int max_all_to_all = 256;  // beyond, all-to-all's N(N-1) messages a round take too long here
};

struct Event {
  double at_us;
  uint64_t order;  // FIFO among equal times
  int from;
  int to;
  std::shared_ptr<const std::string> bytes;  // one encoding, shared by a send's receivers
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.at_us != b.at_us ? a.at_us > b.at_us : a.order > b.order;
  }
};

// Round connections a rank needs under `pattern` (the same for every rank).
int Connections(int size, RoundPattern pattern) {
  if (pattern == RoundPattern::kAllToAll) return size - 1;
  std::vector<int> peers;
  for (int s = 0; s < kolo::RoundSteps(size); ++s) {
    peers.push_back(kolo::RoundSendPeer(0, size, s));
    peers.push_back(kolo::RoundReceivePeer(0, size, s));
  }
  std::sort(peers.begin(), peers.end());
  return static_cast<int>(std::unique(peers.begin(), peers.end()) - peers.begin());
}

struct Result {
  double messages_per_rank = 0;  // per round
  double hops = 0;               // per round, mean
  double max_hops = 0;
  double bytes_per_rank = 0;  // sent, per round
  double cpu_us = 0;          // agreement, per round and rank
  double codec_us = 0;        // encoding and parsing, per round and rank
};

class Simulation {
 public:
  Simulation(int size, RoundPattern pattern, const Flags& flags) : size_(size), flags_(flags) {
    for (int r = 0; r < size; ++r) ranks_.emplace_back(r, size, pattern);
    parsers_.resize(static_cast<size_t>(size));
    for (uint32_t id = 1; id <= flags.ids; ++id) ready_.push_back(id);
  }

  Result Run() {
    Result result;
    double start_us = 0;
    for (int k = 1; k <= flags_.rounds; ++k) {
      decided_ = 0;
      last_decision_us_ = start_us;
      if (flags_.start_all) {
        for (int r = 0; r < size_; ++r) Contribute(r, start_us);
      } else {
        Contribute(static_cast<int>((7919ull * k) % size_), start_us);
      }
      while (!queue_.empty()) {
        Event e = queue_.top();
        queue_.pop();
        Deliver(std::move(e));
      }
      if (decided_ != size_) {
        std::fprintf(stderr, "round %d: only %d of %d ranks decided\n", k, decided_, size_);
        std::exit(1);
      }
      const double hops = (last_decision_us_ - start_us) / flags_.latency_us;
      result.hops += hops / flags_.rounds;
      result.max_hops = std::max(result.max_hops, hops);
      start_us = last_decision_us_;
    }
    const double rank_rounds = static_cast<double>(size_) * flags_.rounds;
    result.messages_per_rank = static_cast<double>(messages_) / rank_rounds;
    result.bytes_per_rank = static_cast<double>(bytes_) / rank_rounds;
    result.cpu_us = std::chrono::duration<double, std::micro>(cpu_).count() / rank_rounds;
    result.codec_us = std::chrono::duration<double, std::micro>(codec_).count() / rank_rounds;
    return result;
  }

 private:
  void Contribute(int r, double now_us) {
    RoundMessage mine;
    mine.received_seq = ranks_[r].current_round();
    mine.fusion_threshold = 64 << 20;
    mine.ready = ready_;
    const Clock::time_point t = Clock::now();
    ranks_[r].RecordSent(&mine, t);
    cpu_ += Clock::now() - t;
    Send(r, now_us);
  }

  void Send(int r, double now_us) {
    std::vector<RoundSend> sends;
    const Clock::time_point t = Clock::now();
    ranks_[r].TakeSends(&sends);
    cpu_ += Clock::now() - t;
    for (RoundSend& s : sends) {
      const Clock::time_point encode = Clock::now();
      auto bytes =
          std::make_shared<const std::string>(kolo::transport::EncodeRoundMessage(s.message));
      codec_ += Clock::now() - encode;
      for (int q = 0; q < size_; ++q) {
        if (q == r || (s.to >= 0 && s.to != q)) continue;
        queue_.push(Event{now_us + flags_.latency_us, order_++, r, q, bytes});
        ++messages_;
        bytes_ += bytes->size();
      }
    }
  }

  void Deliver(Event e) {
    RoundAgreement& rank = ranks_[e.to];
    Clock::time_point t = Clock::now();
    // One parser per connection, as the lanes keep them.
    kolo::transport::RoundStreamParser& parser = parsers_[e.to][e.from];
    const kolo::Status parsed = parser.Feed(e.bytes->data(), e.bytes->size());
    std::vector<RoundMessage> messages;
    parser.Take(&messages);
    codec_ += Clock::now() - t;
    if (!parsed.ok() || messages.size() != 1) {
      std::fprintf(stderr, "rank %d: a message from rank %d did not parse: %s\n", e.to, e.from,
                   parsed.ToString().c_str());
      std::exit(1);
    }
    t = Clock::now();
    const kolo::Status received = rank.Receive(e.from, std::move(messages.front()));
    const bool answer = !rank.waiting() && rank.must_answer();
    cpu_ += Clock::now() - t;
    if (!received.ok()) {
      std::fprintf(stderr, "%s\n", received.ToString().c_str());
      std::exit(1);
    }
    if (answer) Contribute(e.to, e.at_us);
    t = Clock::now();
    const std::optional<RoundDecision> decision = rank.TakeDecision();
    cpu_ += Clock::now() - t;
    Send(e.to, e.at_us);
    if (decision.has_value()) {
      if (decision->runnable.size() != ready_.size()) {
        std::fprintf(stderr, "rank %d decided %zu ids of %zu\n", e.to, decision->runnable.size(),
                     ready_.size());
        std::exit(1);
      }
      ++decided_;
      last_decision_us_ = std::max(last_decision_us_, e.at_us);
    }
  }

  const int size_;
  const Flags& flags_;
  std::vector<RoundAgreement> ranks_;
  // By receiver, by sender: the stream parser of that connection.
  std::vector<std::unordered_map<int, kolo::transport::RoundStreamParser>> parsers_;
  std::vector<uint32_t> ready_;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  uint64_t order_ = 0;
  uint64_t messages_ = 0;
  uint64_t bytes_ = 0;
  Clock::duration cpu_{};
  Clock::duration codec_{};
  int decided_ = 0;
  double last_decision_us_ = 0;
};

std::vector<int> ParseList(const char* text) {
  std::vector<int> out;
  std::string s(text);
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(std::atoi(s.substr(at, comma - at).c_str()));
    at = comma + 1;
  }
  return out;
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "kolo-round-sim: %s\nusage: kolo-round-sim [--ranks 2,4,...] [--rounds N] [--ids N]"
               " [--latency-us X] [--start all|one] [--max-all-to-all N]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage(("no value after " + flag).c_str());
    const char* value = argv[++i];
    if (flag == "--ranks") {
      flags.ranks = ParseList(value);
    } else if (flag == "--rounds") {
      flags.rounds = std::atoi(value);
    } else if (flag == "--ids") {
      flags.ids = static_cast<uint32_t>(std::atoi(value));
    } else if (flag == "--latency-us") {
      flags.latency_us = std::atof(value);
    } else if (flag == "--start") {
      if (std::string(value) != "all" && std::string(value) != "one") {
        return Usage("--start takes all or one");
      }
      flags.start_all = std::string(value) == "all";
    } else if (flag == "--max-all-to-all") {
      flags.max_all_to_all = std::atoi(value);
    } else {
      return Usage(("unknown flag " + flag).c_str());
    }
  }
  for (int n : flags.ranks) {
    if (n < 1 || n > 65536) return Usage("--ranks must be 1..65536");
  }
  if (flags.rounds < 1 || flags.latency_us <= 0) return Usage("--rounds and --latency-us > 0");
  std::printf("start: %s, %u ids ready per rank, %.0f us per message, %d rounds\n",
              flags.start_all ? "all ranks" : "one rank", flags.ids, flags.latency_us,
              flags.rounds);
  std::printf(
      "| ranks | pattern | round connections/rank | messages/rank/round | bytes/rank/round "
      "| hops/round (mean, max) | agreement CPU us/rank/round | wire format CPU us/rank/round |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int n : flags.ranks) {
    for (RoundPattern pattern : {RoundPattern::kAllToAll, RoundPattern::kDissemination}) {
      if (pattern == RoundPattern::kAllToAll && n > flags.max_all_to_all) continue;
      if (pattern == RoundPattern::kDissemination && n < 2) continue;
      Simulation sim(n, pattern, flags);
      const Result r = sim.Run();
      const bool chosen = kolo::RoundPatternFor(n) == pattern;
      std::printf("| %d | %s%s | %d | %.1f | %.0f | %.1f, %.0f | %.1f | %.1f |\n", n,
                  pattern == RoundPattern::kAllToAll ? "all-to-all" : "dissemination",
                  chosen ? " (used)" : "", Connections(n, pattern), r.messages_per_rank,
                  r.bytes_per_rank, r.hops, r.max_hops, r.cpu_us, r.codec_us);
      std::fflush(stdout);
    }
  }
  return 0;
}
