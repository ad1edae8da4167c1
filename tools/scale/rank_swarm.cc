#include "tools/scale/rank_swarm.h"

#include <functional>
#include <thread>
#include <unordered_map>

#include "core/logging.h"
#include "core/wakeup.h"
#include "transport/deadline.h"
#include "transport/grpc/grpc_control_channel.h"

namespace kolo::scale {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// FNV-1a over what a rank was told, so that ranks can be compared without keeping it all.
void Mix(uint64_t* hash, const std::string& bytes) {
  for (unsigned char c : bytes) *hash = (*hash ^ c) * 1099511628211ull;
}

}  // namespace

struct RankSwarm::Rank {
  int rank = -1;
  std::unique_ptr<transport::GrpcControlChannel> channel;
  std::vector<PeerInfo> peers;
  std::vector<uint32_t> cache_ids;  // by gradient index, from the responses; 0: none yet
  // This step: which gradients were decided, how many, and a hash of the responses.
  std::vector<bool> seen;
  int seen_count = 0;
  int responses = 0;
  uint64_t hash = 0;
  bool shut_down = false;
};

struct RankSwarm::Driver {
  Wakeup wakeup;            // notified by its ranks' reader threads
  std::vector<Rank*> mine;  // rank % drivers == this driver's index
};

RankSwarm::RankSwarm(int size, int drivers, std::vector<bench::ModelTensor> gradients,
                     transport::JobCredentials credentials, double timeout_seconds)
    : size_(size),
      gradients_(std::move(gradients)),
      credentials_(std::move(credentials)),
      timeout_seconds_(timeout_seconds) {
  for (size_t i = 0; i < gradients_.size(); ++i) index_.emplace(gradients_[i].name, i);
  for (int d = 0; d < drivers; ++d) drivers_.push_back(std::make_unique<Driver>());
  for (int r = 0; r < size; ++r) {
    auto rank = std::make_unique<Rank>();
    rank->rank = r;
    rank->cache_ids.assign(gradients_.size(), 0);
    drivers_[r % drivers]->mine.push_back(rank.get());
    ranks_.push_back(std::move(rank));
  }
}

RankSwarm::~RankSwarm() {
  for (auto& rank : ranks_) {
    if (rank->channel) rank->channel->Close(std::chrono::steady_clock::now());
  }
}

Status RankSwarm::Connect(const std::function<std::string(int rank)>& address) {
  const SteadyTime deadline = transport::AddSeconds(SteadyTime::clock::now(), timeout_seconds_);
  transport::ControlSecurity security;
  security.credentials = credentials_;
  Logger logger = MakeLogger(0, "control", spdlog::level::warn);
  std::vector<Status> results(ranks_.size());
  std::vector<std::thread> threads;
  for (int d = 0; d < static_cast<int>(drivers_.size()); ++d) {
    Driver* driver = drivers_[d].get();
    for (Rank* rank : driver->mine) {
      threads.emplace_back([&, driver, rank] {
        rank->channel = transport::GrpcControlChannel::Create(address(rank->rank), timeout_seconds_,
                                                              logger, security);
        Hello hello;
        hello.rank = rank->rank;
        hello.size = size_;
        hello.host = "scale-host-" + std::to_string(rank->rank / 8);             // 8 ranks a host
        hello.data_address = "127.0.0.1:" + std::to_string(20000 + rank->rank);  // never dialled
        StatusOr<std::vector<PeerInfo>> peers =
            rank->channel->Connect(hello, deadline, [driver] { driver->wakeup.Notify(); });
        if (peers.ok()) {
          rank->peers = std::move(peers).value();
        } else {
          results[rank->rank] = peers.status();
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();
  for (const Status& status : results) KOLO_RETURN_IF_ERROR(status);
  const std::vector<PeerInfo>& first = ranks_[0]->peers;
  if (static_cast<int>(first.size()) != size_) {
    return Internal("rank 0's peer table has " + std::to_string(first.size()) + " entries for " +
                    std::to_string(size_) + " ranks");
  }
  for (const auto& rank : ranks_) {
    for (int r = 0; r < size_; ++r) {
      const PeerInfo& a = first[r];
      const PeerInfo& b = rank->peers[r];
      if (a.rank != r || b.rank != a.rank || b.host != a.host || b.data_address != a.data_address) {
        return Internal("rank " + std::to_string(rank->rank) + "'s peer table differs from rank " +
                        "0's at entry " + std::to_string(r));
      }
    }
  }
  return Status::Ok();
}

Status RankSwarm::OnDrivers(const std::function<Status(Driver&)>& work) {
  std::vector<Status> results(drivers_.size());
  std::vector<std::thread> threads;
  for (size_t d = 0; d < drivers_.size(); ++d) {
    threads.emplace_back([&, d] { results[d] = work(*drivers_[d]); });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& status : results) KOLO_RETURN_IF_ERROR(status);
  return Status::Ok();
}

StatusOr<StepCheck> RankSwarm::Step(SteadyTime deadline) {
  KOLO_RETURN_IF_ERROR(OnDrivers([&](Driver& driver) {
                         return StepSlice(driver, deadline);
                       }).WithContext("step " + std::to_string(steps_)));
  ++steps_;
  for (const auto& rank : ranks_) {
    if (rank->hash != ranks_[0]->hash || rank->responses != ranks_[0]->responses) {
      return Internal("rank " + std::to_string(rank->rank) +
                      " received other responses than rank 0 in step " +
                      std::to_string(steps_ - 1));
    }
  }
  return StepCheck{ranks_[0]->responses, ranks_[0]->seen_count};
}

Status RankSwarm::Submit(Rank& rank) {
  const int count = static_cast<int>(gradients_.size());
  rank.seen.assign(count, false);
  rank.seen_count = 0;
  rank.responses = 0;
  rank.hash = 14695981039346656037ull;  // FNV-1a's offset basis
  // Backpropagation produces the gradients last layer first.
  WorkerMessage batch;
  batch.kind = WorkerMessage::Kind::kRequests;
  for (int i = count - 1; i >= 0; --i) {
    Request request;
    request.cache_id = rank.cache_ids[i];
    if (request.cache_id == 0) {
      request.meta.name = gradients_[i].name;
      request.meta.shape = {gradients_[i].elements};
    }
    batch.requests.push_back(std::move(request));
  }
  return rank.channel->Send(batch);
}

Status RankSwarm::Take(Rank& rank, const ControllerMessage& message) {
  const std::string who = "rank " + std::to_string(rank.rank);
  if (message.kind == ControllerMessage::Kind::kPong) return Status::Ok();
  if (message.kind != ControllerMessage::Kind::kResponses) {
    return Internal(who + " received a " + KindName(message.kind) + " message" +
                    (message.reason.empty() ? "" : ": " + message.reason));
  }
  for (const Response& response : message.responses) {
    if (response.is_error()) return Internal(who + ": " + response.error);
    ++rank.responses;
    Mix(&rank.hash, std::to_string(response.seq));
    for (size_t n = 0; n < response.names.size(); ++n) {
      auto it = index_.find(response.names[n]);
      if (it == index_.end() || rank.seen[it->second]) {
        return Internal(who + " was told '" + response.names[n] + "' " +
                        (it == index_.end() ? "which it never submitted" : "twice"));
      }
      rank.seen[it->second] = true;
      ++rank.seen_count;
      rank.cache_ids[it->second] = response.cache_ids[n];
      Mix(&rank.hash, response.names[n]);
    }
  }
  return Status::Ok();
}

Status RankSwarm::StepSlice(Driver& driver, SteadyTime deadline) {
  for (Rank* rank : driver.mine) KOLO_RETURN_IF_ERROR(Submit(*rank));
  const int count = static_cast<int>(gradients_.size());
  const int mine = static_cast<int>(driver.mine.size());
  int done = 0;
  for (;;) {
    for (Rank* rank : driver.mine) {
      while (rank->seen_count < count) {
        KOLO_ASSIGN_OR_RETURN(std::optional<ControllerMessage> message,
                              rank->channel->TryReceive());
        if (!message.has_value()) break;
        KOLO_RETURN_IF_ERROR(Take(*rank, *message));
        if (rank->seen_count == count) ++done;
      }
    }
    if (done == mine) return Status::Ok();
    if (SteadyTime::clock::now() >= deadline) {
      return DeadlineExceeded(std::to_string(mine - done) + " of a driver's " +
                              std::to_string(mine) + " ranks still wait for their responses");
    }
    driver.wakeup.WaitUntil(deadline);
  }
}

Status RankSwarm::Shutdown(SteadyTime deadline) {
  return OnDrivers([&](Driver& driver) { return ShutdownSlice(driver, deadline); });
}

Status RankSwarm::ShutdownSlice(Driver& driver, SteadyTime deadline) {
  WorkerMessage notice;
  notice.kind = WorkerMessage::Kind::kShutdown;
  for (Rank* rank : driver.mine) KOLO_RETURN_IF_ERROR(rank->channel->Send(notice));
  size_t done = 0;
  while (done < driver.mine.size()) {
    for (Rank* rank : driver.mine) {
      while (!rank->shut_down) {
        KOLO_ASSIGN_OR_RETURN(std::optional<ControllerMessage> message,
                              rank->channel->TryReceive());
        if (!message.has_value()) break;
        if (message->kind != ControllerMessage::Kind::kShutdown) continue;
        rank->shut_down = true;
        ++done;
        rank->channel->Close(deadline);
      }
    }
    if (done == driver.mine.size()) break;
    if (SteadyTime::clock::now() >= deadline) {
      return DeadlineExceeded("ranks still wait for the job-wide Shutdown");
    }
    driver.wakeup.WaitUntil(deadline);
  }
  return Status::Ok();
}

}  // namespace kolo::scale
