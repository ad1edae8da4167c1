#include "transport/shm/shm_mesh.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <utility>

#include "core/spin_wait.h"
#include "transport/peer_memory.h"
#include "transport/shm/single_copy_probe.h"

namespace kolo::transport {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the futex word is the low half of a 64-bit counter");

constexpr uint64_t kMagic = 0x6b6f6c6f73686d32;  // "koloshm2": boards, probe words
constexpr size_t kPage = 4096;
constexpr size_t kNameBytes = 64;
// A waiter re-checks its deadline and Interrupt at least this often while asleep.
constexpr long kSleepSliceNs = 5'000'000;
constexpr int kYields = 8;  // sched_yield calls before sleeping on the futex (without spin)
// How long a rank whose bootstrap broke waits for rank 0's lock on the segment to drop (a
// killed creator's lock goes a moment after its sockets close) before leaving the name to the
// next job's sweep.
constexpr std::chrono::milliseconds kDyingCreatorWait{1000};
constexpr int kCreateAttempts = 3;  // fresh names tried when a sweep inspects ours meanwhile

struct Header {
  uint64_t magic;
  uint64_t ranks;
  uint64_t slot_bytes;
};

// One per rank, each part on its own pair of cache lines (no false sharing between ranks, nor
// between the sync counter that waiters spin on and the single-copy words).
struct alignas(128) RankWord {
  uint64_t arrived;  // sync points passed; written by its rank only
  uint32_t waiters;  // ranks asleep on `arrived`
  // Written by its rank at creation (the probe) and when it leaves after a failure; read by
  // every writer before each write into this rank.
  alignas(128) ProbeWords probe;
  uint32_t left;  // 1: this rank failed; nobody may write into its memory any more
  // Written by its rank around each write into a peer: 1 + that peer, 0 when none.
  alignas(128) int32_t writing;
};

size_t RoundUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}
size_t WordsOffset() {
  return RoundUp(sizeof(Header), 128);
}
size_t RoundAreaOffset(int size) {
  return RoundUp(WordsOffset() + size * sizeof(RankWord), 128);
}
size_t BoardsOffset(int size) {
  return RoundUp(RoundAreaOffset(size) + ShmRoundArea::Bytes(size), kPage);
}
size_t SlotsOffset(int size) {
  return BoardsOffset(size) + size * ShmMesh::kBoardBytes;
}

RankWord* Words(uint8_t* base) {
  return reinterpret_cast<RankWord*>(base + WordsOffset());
}

uint32_t* FutexWord(RankWord* word) {
  return reinterpret_cast<uint32_t*>(&word->arrived);
}

void FutexWake(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps while *word == expected, at most kSleepSliceNs (spurious returns are fine).
void FutexWait(uint32_t* word, uint32_t expected) {
  timespec slice{0, kSleepSliceNs};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &slice, nullptr, 0);
}

// A fixed byte stream in one direction, for the bootstrap messages.
class BytesExchange final : public StreamExchange {
 public:
  BytesExchange(const void* send, size_t send_bytes, void* recv, size_t recv_bytes)
      : send_(static_cast<const uint8_t*>(send)),
        send_total_(send_bytes),
        recv_(static_cast<uint8_t*>(recv)),
        recv_total_(recv_bytes) {}
  size_t send_total() const override { return send_total_; }
  size_t recv_total() const override { return recv_total_; }
  ConstBytes NextSend() override { return {send_ + sent_, send_total_ - sent_}; }
  void OnSent(size_t n) override { sent_ += n; }
  MutableBytes NextRecv() override { return {recv_ + received_, recv_total_ - received_}; }
  void OnReceived(size_t n) override { received_ += n; }

 private:
  const uint8_t* const send_;
  const size_t send_total_;
  uint8_t* const recv_;
  const size_t recv_total_;
  size_t sent_ = 0;
  size_t received_ = 0;
};

Status SendTo(DataPlane& plane, int peer, const void* data, size_t bytes, const std::string& what) {
  BytesExchange exchange(data, bytes, nullptr, 0);
  return plane.Exchange(peer, -1, exchange, what);
}

Status RecvFrom(DataPlane& plane, int peer, void* data, size_t bytes, const std::string& what) {
  BytesExchange exchange(nullptr, 0, data, bytes);
  return plane.Exchange(-1, peer, exchange, what);
}

// Plane rank `r`'s job rank, for messages (Config::job_ranks).
int JobRankOf(const ShmMesh::Config& config, int r) {
  const auto index = static_cast<size_t>(r);
  return index < config.job_ranks.size() ? config.job_ranks[index] : r;
}

// Rank 0: creates the segment, hands its name to every rank, waits until all mapped it,
// unlinks it and tells everyone the outcome.
StatusOr<std::unique_ptr<ShmSegment>> CreateAndShare(const ShmMesh::Config& config,
                                                     DataPlane& plane, const std::string& what) {
  const size_t bytes = ShmMeshBytes(config.size, config.slot_bytes);
  // Segments of creators killed before they could unlink (issue 19): nobody else removes them.
  const std::vector<std::string> swept = ShmSegment::RemoveStaleSegments();
  if (!swept.empty() && config.logger) {
    std::string names;
    for (const std::string& name : swept) names += (names.empty() ? "" : ", ") + name;
    config.logger->warn("{}: removed {} shared-memory segment{} left by killed jobs: {}", what,
                        swept.size(), swept.size() == 1 ? "" : "s", names);
  }
  StatusOr<std::unique_ptr<ShmSegment>> created = ShmSegment::Create(FreshShmName(), bytes);
  for (int attempt = 1;
       attempt < kCreateAttempts && created.status().code() == StatusCode::kUnavailable;
       ++attempt) {
    created = ShmSegment::Create(FreshShmName(), bytes);
  }
  if (!created.ok()) return created.status().WithContext(what);
  std::unique_ptr<ShmSegment> segment = std::move(created).value();
  Header header{kMagic, static_cast<uint64_t>(config.size), config.slot_bytes};
  std::memcpy(segment->data(), &header, sizeof(header));
  char name[kNameBytes] = {};
  std::strncpy(name, segment->name().c_str(), kNameBytes - 1);
  for (int r = 1; r < config.size; ++r) {
    KOLO_RETURN_IF_ERROR(SendTo(plane, r, name, kNameBytes, what));
  }
  Status outcome;
  for (int r = 1; r < config.size; ++r) {
    uint8_t mapped = 0;
    KOLO_RETURN_IF_ERROR(RecvFrom(plane, r, &mapped, 1, what));
    if (mapped != 1 && outcome.ok()) {
      outcome = Unavailable(what + ": rank " + std::to_string(JobRankOf(config, r)) +
                            " could not map " + segment->name() +
                            " (its log says why); set KOLO_TRANSPORT=tcp " + "to use TCP instead");
    }
  }
  segment->Unlink();  // everyone has it mapped: the name is no longer needed
  const uint8_t verdict = outcome.ok() ? 1 : 0;
  for (int r = 1; r < config.size; ++r) {
    KOLO_RETURN_IF_ERROR(SendTo(plane, r, &verdict, 1, what));
  }
  if (!outcome.ok()) return outcome;
  return segment;
}

// Other ranks: map the segment rank 0 names, say whether that worked, hear the outcome.
StatusOr<std::unique_ptr<ShmSegment>> OpenShared(const ShmMesh::Config& config, DataPlane& plane,
                                                 const std::string& what) {
  char name[kNameBytes] = {};
  KOLO_RETURN_IF_ERROR(RecvFrom(plane, 0, name, kNameBytes, what));
  name[kNameBytes - 1] = '\0';
  StatusOr<std::unique_ptr<ShmSegment>> opened =
      ShmSegment::Open(name, ShmMeshBytes(config.size, config.slot_bytes));
  Status mapped = opened.status();
  if (mapped.ok()) {
    Header header{};
    std::memcpy(&header, (*opened)->data(), sizeof(header));
    if (header.magic != kMagic || header.ranks != static_cast<uint64_t>(config.size) ||
        header.slot_bytes != config.slot_bytes) {
      mapped = Internal(std::string("shared memory ") + name + " has another layout");
    }
  }
  if (!mapped.ok() && config.logger) config.logger->error("{}: {}", what, mapped.message());
  const uint8_t ack = mapped.ok() ? 1 : 0;
  uint8_t verdict = 0;
  Status heard = SendTo(plane, 0, &ack, 1, what);
  if (heard.ok()) heard = RecvFrom(plane, 0, &verdict, 1, what);
  if (!heard.ok()) {
    // Rank 0 may have died holding the name: if so, nobody else would remove it.
    if (ShmSegment::RemoveIfAbandoned(name, kDyingCreatorWait) && config.logger) {
      config.logger->warn("{}: removed {}, which rank 0 left behind", what, name);
    }
    return heard;
  }
  if (!mapped.ok()) return mapped.WithContext(what);
  if (verdict != 1) {
    return Unavailable(what + ": another rank could not map the segment (rank 0's log names it)");
  }
  return std::move(opened).value();
}

}  // namespace

size_t ShmMeshBytes(int size, size_t slot_bytes) {
  return SlotsOffset(size) + size_t{SharedMemoryPlane::kSlotSets} * size * slot_bytes;
}

StatusOr<std::unique_ptr<ShmMesh>> ShmMesh::Create(const Config& config, DataPlane& bootstrap) {
  Config fixed = config;
  fixed.slot_bytes = RoundUp(config.slot_bytes == 0 ? kDefaultSlotBytes : config.slot_bytes, 64);
  if (!fixed.logger) fixed.logger = MakeLogger(config.rank, "shm", spdlog::level::warn);
  const std::string what = "shared-memory data plane of " + std::to_string(config.size) + " ranks";
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<ShmSegment> segment,
                        config.rank == 0 ? CreateAndShare(fixed, bootstrap, what)
                                         : OpenShared(fixed, bootstrap, what));
  std::unique_ptr<ShmMesh> mesh(new ShmMesh(fixed, std::move(segment)));
  KOLO_RETURN_IF_ERROR(mesh->AgreeOnSingleCopy(what));
  return mesh;
}

Status ShmMesh::AgreeOnSingleCopy(const std::string& what) {
  RankWord* words = Words(segment_->data());
  ProbeRefusal skip = kProbeNone;
  if (config_.single_copy == SingleCopy::kOff) {
    skip = kProbeOff;
  } else if (config_.single_copy == SingleCopy::kAuto && config_.size == 2 && !config_.spin) {
    skip = kProbeNotChosen;
  }
  KOLO_ASSIGN_OR_RETURN(
      const ProbeOutcome outcome,
      ProbeSingleCopy(
          config_.rank, config_.size, skip, [words](int r) { return &words[r].probe; },
          [&] { return Sync(what + ", probing single copy"); }));
  agreed_.pids = outcome.pids;
  agreed_.single_copy = outcome.single_copy && config_.size > 1;
  if (config_.single_copy == SingleCopy::kAuto && config_.size > 2) {
    agreed_.max_bytes = kAutoMaxBytesBeyondTwoRanks;
  }
  if (!outcome.single_copy && config_.single_copy == SingleCopy::kOn) {
    return FailedPrecondition(what + ": KOLO_SHM_SINGLE_COPY=on, but " + outcome.refusal);
  }
  if (config_.rank != 0 || config_.size == 1) return Status::Ok();
  if (outcome.single_copy && agreed_.max_bytes != SIZE_MAX) {
    config_.logger->info("{}: single copy on for ops of at most {} MiB (process_vm_readv/writev)",
                         what, agreed_.max_bytes >> 20);
  } else if (outcome.single_copy) {
    config_.logger->info("{}: single copy on (process_vm_readv/writev)", what);
  } else if (outcome.refusal_kind == kProbeNotChosen || outcome.refusal_kind == kProbeOff) {
    config_.logger->info("{}: single copy off: {}", what, outcome.refusal);
  } else {
    config_.logger->warn(
        "{}: single copy off, allreduce copies through the segment instead: {} "
        "(KOLO_SHM_SINGLE_COPY=off skips the probe)",
        what, outcome.refusal);
  }
  return Status::Ok();
}

ShmMesh::ShmMesh(const Config& config, std::unique_ptr<ShmSegment> segment)
    : config_(config), segment_(std::move(segment)) {}

ShmMesh::~ShmMesh() = default;

ShmRoundArea ShmMesh::round_area() const {
  return ShmRoundArea(segment_->data() + RoundAreaOffset(config_.size), config_.size);
}

uint8_t* ShmMesh::board(int owner) {
  return segment_->data() + BoardsOffset(config_.size) + owner * kBoardBytes;
}

uint8_t* ShmMesh::slot(int set, int owner) {
  const size_t index = static_cast<size_t>(set) * config_.size + owner;
  return segment_->data() + SlotsOffset(config_.size) + index * config_.slot_bytes;
}

Status ShmMesh::Sync(const std::string& what) {
  if (!failed_.ok()) return failed_;
  if (interrupted_.load(std::memory_order_acquire)) return Fail(InterruptStatus());
  RankWord* words = Words(segment_->data());
  RankWord& mine = words[config_.rank];
  ++step_;
  // Sequentially consistent store, then load of `waiters` (and the reverse order on the
  // waiter's side): either the waiter sees the new count or we see the waiter and wake it.
  __atomic_store_n(&mine.arrived, step_, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&mine.waiters, __ATOMIC_SEQ_CST) != 0) FutexWake(FutexWord(&mine));
  for (int peer = 0; peer < config_.size; ++peer) {
    if (peer == config_.rank) continue;
    const Status arrived = WaitFor(peer, step_, what);
    if (!arrived.ok()) return Fail(arrived);
  }
  return Status::Ok();
}

Status ShmMesh::ReadPeer(int peer, const std::vector<PeerRange>& ranges, void* local,
                         const std::string& what) {
  if (!failed_.ok()) return failed_;
  if (interrupted_.load(std::memory_order_acquire)) return Fail(InterruptStatus());
  if (HasLeft(peer)) return Status::Ok();
  const int err = ReadProcessMemory(agreed_.pids[peer], ranges, local);
  return err == 0 ? Status::Ok() : CopyFailed(peer, err, "read", what);
}

Status ShmMesh::WritePeer(int peer, const void* local, const std::vector<PeerRange>& ranges,
                          const std::string& what) {
  if (!failed_.ok()) return failed_;
  if (interrupted_.load(std::memory_order_acquire)) return Fail(InterruptStatus());
  // Announce the write, then look whether the peer left; a peer that leaves stores its flag,
  // then looks for announced writes (both sequentially consistent): either we see its flag
  // and do not write, or it sees our announcement and waits until we are done.
  int32_t* writing = &Words(segment_->data())[config_.rank].writing;
  __atomic_store_n(writing, peer + 1, __ATOMIC_SEQ_CST);
  if (HasLeft(peer)) {
    __atomic_store_n(writing, 0, __ATOMIC_RELEASE);
    return Status::Ok();
  }
  const int err = WriteProcessMemory(agreed_.pids[peer], local, ranges);
  __atomic_store_n(writing, 0, __ATOMIC_RELEASE);
  return err == 0 ? Status::Ok() : CopyFailed(peer, err, "write into", what);
}

int ShmMesh::JobRank(int r) const {
  return JobRankOf(config_, r);
}

bool ShmMesh::HasLeft(int peer) const {
  return __atomic_load_n(&Words(segment_->data())[peer].left, __ATOMIC_SEQ_CST) != 0;
}

Status ShmMesh::CopyFailed(int peer, int err, const char* verb, const std::string& what) {
  if (HasLeft(peer)) return Status::Ok();
  const std::string message = what + ": could not " + verb + " rank " +
                              std::to_string(JobRank(peer)) +
                              "'s memory: " + ProcessMemoryErrorText(err);
  return Fail(err == ESRCH ? Unavailable(message) : Internal(message));
}

Status ShmMesh::Fail(const Status& status) {
  if (!failed_.ok()) return status;
  failed_ = status;
  if (!agreed_.single_copy) return status;
  RankWord* words = Words(segment_->data());
  __atomic_store_n(&words[config_.rank].left, 1, __ATOMIC_SEQ_CST);
  const auto grace = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWriterGraceMs);
  for (int peer = 0; peer < config_.size; ++peer) {
    while (__atomic_load_n(&words[peer].writing, __ATOMIC_SEQ_CST) == config_.rank + 1) {
      if (std::chrono::steady_clock::now() >= grace) {
        config_.logger->warn(
            "left the shared-memory plane after a failure while rank {} was still writing into "
            "this process's memory ({} ms later; is it stopped?)",
            peer, kWriterGraceMs);
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  return status;
}

Status ShmMesh::WaitFor(int peer, uint64_t step, const std::string& what) {
  RankWord& word = Words(segment_->data())[peer];
  auto arrived = [&] { return __atomic_load_n(&word.arrived, __ATOMIC_ACQUIRE) >= step; };
  if (arrived()) return Status::Ok();
  if (config_.spin) {
    // The peer runs on a core of its own: keep this one while polling. A yield would hand it
    // to whatever else wants it (a busy host's other processes) for a whole time slice.
    if (SpinWait(arrived, ThisThreadPollBudget(config_.poll_budget), BetweenPolls::kKeepCore)) {
      return Status::Ok();
    }
  } else {
    // More ranks than cores: let the one we wait for run.
    for (int i = 0; i < kYields; ++i) {
      sched_yield();
      if (arrived()) return Status::Ok();
    }
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::duration<double>(config_.timeout_seconds));
  while (true) {
    if (interrupted_.load(std::memory_order_acquire)) return InterruptStatus();
    __atomic_add_fetch(&word.waiters, 1, __ATOMIC_SEQ_CST);
    const uint64_t seen = __atomic_load_n(&word.arrived, __ATOMIC_SEQ_CST);
    if (seen < step) FutexWait(FutexWord(&word), static_cast<uint32_t>(seen));
    __atomic_sub_fetch(&word.waiters, 1, __ATOMIC_SEQ_CST);
    if (arrived()) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) return NotArrived(step, what);
  }
}

Status ShmMesh::NotArrived(uint64_t step, const std::string& what) const {
  RankWord* words = Words(segment_->data());
  std::string missing;
  int count = 0;
  for (int r = 0; r < config_.size; ++r) {
    if (__atomic_load_n(&words[r].arrived, __ATOMIC_ACQUIRE) >= step) continue;
    missing += (count++ == 0 ? "" : ", ") + std::to_string(JobRank(r));
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", config_.timeout_seconds);
  return DeadlineExceeded(what + ": rank" + (count == 1 ? " " : "s ") + missing +
                          " did not reach the shared-memory sync point within " + seconds +
                          " s (KOLO_TIMEOUT_SECONDS)");
}

void ShmMesh::Interrupt(const Status& why) {
  {
    MutexLock lock(&mu_);
    if (interrupted_.load()) return;
    interrupt_status_ = why.ok() ? Aborted("interrupted") : why;
    interrupted_.store(true, std::memory_order_release);
  }
  // Wake our own waiter now rather than at the end of its sleep slice (peers may wake
  // spuriously too; they re-check and sleep again).
  RankWord* words = Words(segment_->data());
  for (int r = 0; r < config_.size; ++r) FutexWake(FutexWord(&words[r]));
}

Status ShmMesh::InterruptStatus() const {
  MutexLock lock(&mu_);
  return interrupt_status_;
}

}  // namespace kolo::transport
