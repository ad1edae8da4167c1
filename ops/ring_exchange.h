// RingExchange: the StreamExchange that runs one rank's whole ring allreduce (all 2(n-1) steps
// of RingSchedule) as one send stream to the right neighbour and one receive stream from the
// left. Used by RingAllreduce; public so that tests can drive it without a network.
//
// Pipelining: send segment k > 0 is the chunk received by segment k-1, so NextSend exposes it
// only as far as that receive has been reduced or written; segment 0 is ready at once. Reduce
// segments receive into the RingScratch and are reduced element by element as bytes arrive (a
// trailing partial element waits at the scratch front); allgather segments receive straight
// into the buffer. Threading: driven by one thread (inside DataPlane::Exchange).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/data_plane.h"
#include "kolo/types.h"
#include "ops/ring_allreduce.h"
#include "ops/segmented_buffer.h"

namespace kolo::ops {

class RingExchange final : public StreamExchange {
 public:
  // `buffer` holds `count` elements of `dtype`; it and `scratch` must outlive the exchange.
  RingExchange(void* buffer, size_t count, DataType dtype, ReduceOp op, int rank, int size,
               RingScratch& scratch);
  // The general form: chunk i is `chunks[i]` (element ranges of the buffer) and the steps are
  // `schedule` (send segment k > 0 must forward what segment k-1 received, as in
  // RingSchedule). Reduce-scatter uses its own chunks and only the reduce steps.
  RingExchange(void* buffer, const std::vector<ElementRange>& chunks,
               const std::vector<RingSegment>& schedule, DataType dtype, ReduceOp op,
               RingScratch& scratch);
  // The general form over several pieces of memory as one buffer (every piece a whole number
  // of elements). A one-step schedule is a pairwise exchange (ops/halving_doubling.h).
  RingExchange(const SegmentedBuffer& buffer, const std::vector<ElementRange>& chunks,
               const std::vector<RingSegment>& schedule, DataType dtype, ReduceOp op,
               RingScratch& scratch);
  // Over several pieces of memory as one buffer (every piece a whole number of elements), for
  // fused tensors reduced in place; the even chunks and RingSchedule of the first form.
  RingExchange(const SegmentedBuffer& buffer, DataType dtype, ReduceOp op, int rank, int size,
               RingScratch& scratch);

  size_t send_total() const override { return send_total_; }
  size_t recv_total() const override { return recv_total_; }
  ConstBytes NextSend() override;
  void OnSent(size_t n) override;
  MutableBytes NextRecv() override;
  void OnReceived(size_t n) override;

  // Both streams are complete: every byte sent, received and reduced or written.
  bool done() const;

 private:
  struct Segment {
    size_t send_offset = 0;  // bytes into the buffer
    size_t send_bytes = 0;
    size_t recv_offset = 0;
    size_t recv_bytes = 0;
    bool reduce = false;
  };

  // Bytes of receive segment `k` that are final in the buffer (reduced or written).
  size_t ProcessedBytes(size_t k) const;
  // Bytes of send_segment_ that may be sent (sent_ included).
  size_t SendReady() const;
  void SkipFinishedSends();
  void SkipFinishedRecvs();
  void Init(const std::vector<ElementRange>& chunks, const std::vector<RingSegment>& schedule);

  // Constant after construction.
  const SegmentedBuffer buffer_;
  const DataType dtype_;
  const ReduceOp op_;
  const size_t element_size_;
  uint8_t* const scratch_;
  const size_t scratch_bytes_;
  std::vector<Segment> segments_;
  size_t send_total_ = 0;
  size_t recv_total_ = 0;

  // Progress (the exchange's one thread).
  size_t send_segment_ = 0;  // first segment not completely sent
  size_t sent_ = 0;          // bytes of send_segment_ reported by OnSent
  size_t recv_segment_ = 0;  // first segment not completely received and processed
  size_t received_ = 0;      // bytes of recv_segment_ received
  size_t processed_ = 0;     // ... of which reduced or written into the buffer
  size_t recv_window_ = 0;   // size of the last NextRecv region
};

}  // namespace kolo::ops
