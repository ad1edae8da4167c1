#include "transport/p2p/p2p_ring.h"

#include <algorithm>
#include <string>

#include "transport/ring_bytes.h"

namespace kolo::transport {
namespace {

static_assert((kP2pRingBytes & (kP2pRingBytes - 1)) == 0, "ring size: a power of two");

uint64_t Load(const uint64_t* at) {
  return __atomic_load_n(at, __ATOMIC_SEQ_CST);
}

P2pRingShared* RingAt(const ShmSegment& segment, int index) {
  return reinterpret_cast<P2pRingShared*>(segment.data()) + index;
}

}  // namespace

P2pRing::P2pRing(std::unique_ptr<ShmSegment> segment, bool lower)
    : segment_(std::move(segment)),
      out_(RingAt(*segment_, lower ? 0 : 1)),
      in_(RingAt(*segment_, lower ? 1 : 0)) {}

size_t P2pRing::Write(const uint8_t* data, size_t n) {
  const uint64_t used = tail_ - Load(&out_->head);
  // A reader that moved head past our tail broke the protocol: nothing more goes in (its own
  // checks report the damage; our end fails at its timeout).
  if (used > kP2pRingBytes) return 0;
  const size_t take = std::min(n, kP2pRingBytes - static_cast<size_t>(used));
  CopyIntoRing(out_->data, kP2pRingBytes, tail_, data, take);
  tail_ += take;
  return take;
}

bool P2pRing::Publish() {
  __atomic_store_n(&out_->tail, tail_, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&out_->reader_sleeps, __ATOMIC_SEQ_CST) == 0) return false;
  return __atomic_exchange_n(&out_->reader_sleeps, 0u, __ATOMIC_SEQ_CST) != 0;
}

bool P2pRing::AskForRoom() {
  __atomic_store_n(&out_->writer_waits, 1u, __ATOMIC_SEQ_CST);
  if (tail_ - Load(&out_->head) >= kP2pRingBytes) return false;
  __atomic_store_n(&out_->writer_waits, 0u, __ATOMIC_SEQ_CST);
  return true;
}

bool P2pRing::HasData() const {
  return Load(&in_->tail) != head_;
}

StatusOr<size_t> P2pRing::Take(uint8_t* out, size_t n) {
  const uint64_t available = Load(&in_->tail) - head_;
  if (available > kP2pRingBytes) {
    return Unavailable("its shared-memory ring holds " + std::to_string(available) +
                       " bytes, more than its " + std::to_string(kP2pRingBytes));
  }
  const size_t take = std::min(n, static_cast<size_t>(available));
  if (out != nullptr) CopyOutOfRing(in_->data, kP2pRingBytes, head_, out, take);
  head_ += take;
  if (take > 0) __atomic_store_n(&in_->head, head_, __ATOMIC_SEQ_CST);
  return take;
}

bool P2pRing::WriterWaited() {
  if (__atomic_load_n(&in_->writer_waits, __ATOMIC_SEQ_CST) == 0) return false;
  return __atomic_exchange_n(&in_->writer_waits, 0u, __ATOMIC_SEQ_CST) != 0;
}

void P2pRing::SetSleeping(bool sleeping) {
  __atomic_store_n(&in_->reader_sleeps, sleeping ? 1u : 0u, __ATOMIC_SEQ_CST);
}

}  // namespace kolo::transport
