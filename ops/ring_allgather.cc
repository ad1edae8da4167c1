#include "ops/ring_allgather.h"

#include <algorithm>
#include <cstdint>

namespace kolo::ops {
namespace {

class AllgatherExchange final : public StreamExchange {
 public:
  AllgatherExchange(uint8_t* output, std::vector<BlockAt> sends, std::vector<BlockAt> recvs)
      : output_(output), sends_(std::move(sends)), recvs_(std::move(recvs)) {
    for (const BlockAt& b : sends_) send_total_ += b.bytes;
    for (const BlockAt& b : recvs_) recv_total_ += b.bytes;
    Skip();
  }

  size_t send_total() const override { return send_total_; }
  size_t recv_total() const override { return recv_total_; }

  ConstBytes NextSend() override {
    if (send_index_ >= sends_.size()) return {};
    const BlockAt& block = sends_[send_index_];
    return {output_ + block.offset + sent_, Ready(send_index_) - sent_};
  }
  void OnSent(size_t n) override {
    sent_ += n;
    Skip();
  }
  MutableBytes NextRecv() override {
    if (recv_index_ >= recvs_.size()) return {};
    const BlockAt& block = recvs_[recv_index_];
    return {output_ + block.offset + received_, block.bytes - received_};
  }
  void OnReceived(size_t n) override {
    received_ += n;
    Skip();
  }

 private:
  // Bytes of send segment k that may go: all of this rank's own block (k = 0); of a block
  // received at step k-1, what has arrived of it.
  size_t Ready(size_t k) const {
    if (k == 0 || recv_index_ > k - 1) return sends_[k].bytes;
    return recv_index_ == k - 1 ? received_ : 0;
  }
  // Moves past finished (and empty) segments in both streams.
  void Skip() {
    while (recv_index_ < recvs_.size() && received_ == recvs_[recv_index_].bytes) {
      ++recv_index_;
      received_ = 0;
    }
    while (send_index_ < sends_.size() && sent_ == sends_[send_index_].bytes) {
      ++send_index_;
      sent_ = 0;
    }
  }

  uint8_t* const output_;
  const std::vector<BlockAt> sends_;
  const std::vector<BlockAt> recvs_;
  size_t send_total_ = 0;
  size_t recv_total_ = 0;
  size_t send_index_ = 0;
  size_t sent_ = 0;  // of sends_[send_index_]
  size_t recv_index_ = 0;
  size_t received_ = 0;  // of recvs_[recv_index_]
};

}  // namespace

Status RingAllgather(DataPlane& plane, void* output, const std::vector<size_t>& block_bytes,
                     const std::string& what) {
  std::vector<BlockAt> blocks(block_bytes.size());
  size_t offset = 0;
  for (size_t i = 0; i < block_bytes.size(); ++i) {
    blocks[i] = BlockAt{offset, block_bytes[i]};
    offset += block_bytes[i];
  }
  return RingAllgatherAt(plane, output, blocks, what);
}

Status RingAllgatherAt(DataPlane& plane, void* output, const std::vector<BlockAt>& blocks,
                       const std::string& what) {
  const int n = plane.size();
  const int r = plane.rank();
  if (static_cast<int>(blocks.size()) != n) {
    return Internal(what + ": " + std::to_string(blocks.size()) + " blocks for " +
                    std::to_string(n) + " ranks");
  }
  if (n == 1) return Status::Ok();
  std::vector<BlockAt> sends, recvs;
  for (int s = 0; s < n - 1; ++s) {
    sends.push_back(blocks[((r - s) % n + n) % n]);
    recvs.push_back(blocks[((r - s - 1) % n + n) % n]);
  }
  AllgatherExchange exchange(static_cast<uint8_t*>(output), std::move(sends), std::move(recvs));
  return plane.Exchange((r + 1) % n, (r - 1 + n) % n, exchange, what);
}

}  // namespace kolo::ops
