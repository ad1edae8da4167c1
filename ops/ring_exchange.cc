#include "ops/ring_exchange.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "ops/reduce_kernels.h"

namespace kolo::ops {
namespace {

// Bytes from the start of the buffer to the end of the last chunk.
size_t ChunksBytes(const std::vector<ElementRange>& chunks, size_t element_size) {
  size_t end = 0;
  for (const ElementRange& chunk : chunks) end = std::max(end, chunk.begin + chunk.count);
  return end * element_size;
}

std::vector<ElementRange> EvenChunks(size_t count, int size) {
  std::vector<ElementRange> chunks;
  for (int chunk = 0; chunk < size; ++chunk) chunks.push_back(ChunkRange(count, size, chunk));
  return chunks;
}

}  // namespace

RingExchange::RingExchange(void* buffer, size_t count, DataType dtype, ReduceOp op, int rank,
                           int size, RingScratch& scratch)
    : RingExchange(buffer, EvenChunks(count, size), RingSchedule(rank, size), dtype, op, scratch) {}

RingExchange::RingExchange(void* buffer, const std::vector<ElementRange>& chunks,
                           const std::vector<RingSegment>& schedule, DataType dtype, ReduceOp op,
                           RingScratch& scratch)
    : RingExchange(SegmentedBuffer(buffer, ChunksBytes(chunks, DataTypeSize(dtype))), chunks,
                   schedule, dtype, op, scratch) {}

RingExchange::RingExchange(const SegmentedBuffer& buffer, const std::vector<ElementRange>& chunks,
                           const std::vector<RingSegment>& schedule, DataType dtype, ReduceOp op,
                           RingScratch& scratch)
    : buffer_(buffer),
      dtype_(dtype),
      op_(op),
      element_size_(DataTypeSize(dtype)),
      scratch_(scratch.data()),
      scratch_bytes_(scratch.size()) {
  Init(chunks, schedule);
}

RingExchange::RingExchange(const SegmentedBuffer& buffer, DataType dtype, ReduceOp op, int rank,
                           int size, RingScratch& scratch)
    : RingExchange(buffer, EvenChunks(buffer.total() / DataTypeSize(dtype), size),
                   RingSchedule(rank, size), dtype, op, scratch) {}

void RingExchange::Init(const std::vector<ElementRange>& chunks,
                        const std::vector<RingSegment>& schedule) {
  for (const RingSegment& step : schedule) {
    const ElementRange send = chunks[step.send_chunk];
    const ElementRange recv = chunks[step.recv_chunk];
    Segment segment;
    segment.send_offset = send.begin * element_size_;
    segment.send_bytes = send.count * element_size_;
    segment.recv_offset = recv.begin * element_size_;
    segment.recv_bytes = recv.count * element_size_;
    segment.reduce = step.reduce;
    send_total_ += segment.send_bytes;
    recv_total_ += segment.recv_bytes;
    segments_.push_back(segment);
  }
  SkipFinishedSends();
  SkipFinishedRecvs();
}

size_t RingExchange::ProcessedBytes(size_t k) const {
  if (k < recv_segment_) return segments_[k].recv_bytes;
  return k == recv_segment_ ? processed_ : 0;
}

size_t RingExchange::SendReady() const {
  if (send_segment_ == segments_.size()) return 0;
  // Segment k > 0 forwards what segment k-1 received, as far as it is final in the buffer.
  return send_segment_ == 0 ? segments_[0].send_bytes : ProcessedBytes(send_segment_ - 1);
}

ConstBytes RingExchange::NextSend() {
  const size_t ready = SendReady();
  if (ready <= sent_) return {};
  const Segment& segment = segments_[send_segment_];
  const SegmentedBuffer::Span span = buffer_.Locate(segment.send_offset + sent_);
  return {span.data, std::min(ready - sent_, span.bytes)};
}

void RingExchange::OnSent(size_t n) {
  const size_t ready = SendReady();
  // More than offered would be the data plane breaking the StreamExchange contract.
  KOLO_CHECK(n <= ready - sent_) << "RingExchange::OnSent(" << n << ") beyond the " << ready - sent_
                                 << " bytes offered";
  sent_ += n;
  SkipFinishedSends();
}

MutableBytes RingExchange::NextRecv() {
  recv_window_ = 0;
  if (recv_segment_ == segments_.size()) return {};
  const Segment& segment = segments_[recv_segment_];
  const size_t remaining = segment.recv_bytes - received_;
  if (segment.reduce) {
    const size_t pending = received_ - processed_;  // a partial element at the scratch front
    recv_window_ = std::min(remaining, scratch_bytes_ - pending);
    return {scratch_ + pending, recv_window_};
  }
  const SegmentedBuffer::Span span = buffer_.Locate(segment.recv_offset + received_);
  recv_window_ = std::min(remaining, span.bytes);
  return {span.data, recv_window_};
}

void RingExchange::OnReceived(size_t n) {
  KOLO_CHECK(n <= recv_window_) << "RingExchange::OnReceived(" << n << ") beyond the "
                                << recv_window_ << " bytes offered";
  recv_window_ = 0;
  const Segment& segment = segments_[recv_segment_];
  received_ += n;
  if (!segment.reduce) {
    processed_ = received_;
  } else {
    const size_t have = received_ - processed_;
    const size_t whole = have - have % element_size_;
    // Piece by piece: pieces hold whole elements, so no element straddles two.
    for (size_t done = 0; done < whole;) {
      const SegmentedBuffer::Span span = buffer_.Locate(segment.recv_offset + processed_ + done);
      const size_t bytes = std::min(whole - done, span.bytes);
      Reduce(span.data, scratch_ + done, bytes / element_size_, dtype_, op_);
      done += bytes;
    }
    processed_ += whole;
    if (have > whole) std::memmove(scratch_, scratch_ + whole, have - whole);
  }
  SkipFinishedRecvs();
}

bool RingExchange::done() const {
  return send_segment_ == segments_.size() && recv_segment_ == segments_.size();
}

void RingExchange::SkipFinishedSends() {
  while (send_segment_ < segments_.size() && sent_ == segments_[send_segment_].send_bytes) {
    ++send_segment_;
    sent_ = 0;
  }
}

void RingExchange::SkipFinishedRecvs() {
  while (recv_segment_ < segments_.size() && processed_ == segments_[recv_segment_].recv_bytes) {
    ++recv_segment_;
    received_ = 0;
    processed_ = 0;
  }
}

}  // namespace kolo::ops
