// SimRank: one simulated GPU rank for the collective tests (a SimDevice, SimCollectives over it,
// a comm, a stream and an event), and RunRanks, which runs one body per rank on its own
// thread. Every wait polls with a deadline, as kolo's completion thread will. A SimRank is used
// by one thread; RunRanks joins its threads before it returns.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/sim_gpu/sim_collectives.h"
#include "tests/support/sim_gpu/sim_star_link.h"

namespace kolo::gpu::testing {

using SimOptions = sim::SimCollectives::Options;

class SimRank {
 public:
  SimRank(int size, int rank, const UniqueId& id, const SimOptions& options = {})
      : size_(size), rank_(rank), coll_(&dev_, options) {
    StatusOr<StreamHandle> stream = dev_.CreateStream(true);
    StatusOr<EventHandle> event = dev_.CreateEvent(false);
    if (stream.ok()) stream_ = *stream;
    if (event.ok()) event_ = *event;
    StatusOr<CommHandle> comm = coll_.InitComm(size, rank, id, 0);
    init_ = comm.status();
    if (comm.ok()) comm_ = *comm;
  }
  ~SimRank() {
    if (comm_ != nullptr) coll_.Destroy(comm_).IgnoreError();  // tests check what they need
    // The stream first: it runs what is queued, event markers included. (SimDevice's
    // DestroyEvent returns early on a stream error and would free an event a marker still
    // names.)
    dev_.DestroyStream(stream_).IgnoreError();
    dev_.DestroyEvent(event_).IgnoreError();
    for (void* p : buffers_) dev_.Free(p).IgnoreError();
  }
  SimRank(const SimRank&) = delete;
  SimRank& operator=(const SimRank&) = delete;

  int size() const { return size_; }
  int rank() const { return rank_; }
  sim::SimDevice& dev() { return dev_; }
  CollectiveApi& coll() { return coll_; }
  CommHandle comm() const { return comm_; }
  StreamHandle stream() const { return stream_; }
  const Status& init() const { return init_; }

  // Polls PollComm until the comm is ready, fails, or `limit` passes.
  Status WaitReady(std::chrono::milliseconds limit) {
    KOLO_RETURN_IF_ERROR(init_);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      StatusOr<CommState> state = coll_.PollComm(comm_);
      if (!state.ok()) return state.status();
      if (*state == CommState::kReady) return Status::Ok();
      if (std::chrono::steady_clock::now() > deadline) return DeadlineExceeded("comm not ready");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  // Records the event after the work enqueued so far and polls it until done, failed, or
  // `limit` passes (DeadlineExceeded "still running").
  Status Finish(std::chrono::milliseconds limit) {
    KOLO_RETURN_IF_ERROR(dev_.RecordEvent(event_, stream_));
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      StatusOr<bool> done = dev_.QueryEvent(event_);
      if (!done.ok()) return done.status();
      if (*done) return Status::Ok();
      if (std::chrono::steady_clock::now() > deadline) return DeadlineExceeded("still running");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  // Device memory freed with the rank (0 bytes: a valid pointer nothing may be read from).
  void* Alloc(size_t bytes) {
    StatusOr<void*> p = dev_.Malloc(bytes);
    if (!p.ok()) return nullptr;
    buffers_.push_back(*p);
    return *p;
  }
  // A device copy of `bytes`, complete when this returns.
  void* Upload(const std::vector<uint8_t>& bytes) {
    void* p = Alloc(bytes.size());
    if (p == nullptr || bytes.empty()) return p;
    const Status copied =
        dev_.MemcpyAsync(p, bytes.data(), bytes.size(), CopyKind::kHostToDevice, stream_);
    if (!copied.ok() || !Finish(std::chrono::seconds(10)).ok()) return nullptr;
    return p;
  }
  // `bytes` of device memory at `ptr`, after the work enqueued so far.
  StatusOr<std::vector<uint8_t>> Download(const void* ptr, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    if (bytes > 0) {
      KOLO_RETURN_IF_ERROR(
          dev_.MemcpyAsync(host.data(), ptr, bytes, CopyKind::kDeviceToHost, stream_));
    }
    KOLO_RETURN_IF_ERROR(Finish(std::chrono::seconds(10)));
    return host;
  }

 private:
  const int size_;
  const int rank_;
  sim::SimDevice dev_;
  sim::SimCollectives coll_;
  StreamHandle stream_ = nullptr;
  EventHandle event_ = nullptr;
  CommHandle comm_ = nullptr;
  Status init_;
  std::vector<void*> buffers_;
};

// Runs body(rank) for every rank of a fresh comm of `size`, each on its own thread, after its
// comm is ready; returns each rank's failure ("" when it passed).
inline std::vector<std::string> RunRanks(
    int size, const std::function<std::string(SimRank&)>& body,
    const std::function<SimOptions(int rank)>& options = [](int) { return SimOptions{}; }) {
  const UniqueId id = sim::NewSimId();
  std::vector<std::string> failures(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      SimRank rank(size, r, id, options(r));
      const Status ready = rank.WaitReady(std::chrono::seconds(20));
      failures[static_cast<size_t>(r)] =
          ready.ok() ? body(rank) : "rank " + std::to_string(r) + ": " + ready.ToString();
    });
  }
  for (std::thread& t : threads) t.join();
  return failures;
}

}  // namespace kolo::gpu::testing
