#include "ops/chain_broadcast.h"

#include <algorithm>
#include <cstdint>

namespace kolo::ops {
namespace {

// One rank's part of the chain: receives the buffer from its predecessor into place and
// exposes to its successor whatever has arrived (everything, on the root).
class ChainExchange final : public StreamExchange {
 public:
  ChainExchange(uint8_t* buffer, size_t bytes, bool receives, bool sends)
      : buffer_(buffer),
        bytes_(bytes),
        recv_total_(receives ? bytes : 0),
        send_total_(sends ? bytes : 0),
        received_(receives ? 0 : bytes) {}

  size_t send_total() const override { return send_total_; }
  size_t recv_total() const override { return recv_total_; }
  ConstBytes NextSend() override {
    if (sent_ >= send_total_) return {};
    return {buffer_ + sent_, std::min(received_, bytes_) - sent_};
  }
  void OnSent(size_t n) override { sent_ += n; }
  MutableBytes NextRecv() override {
    if (received_ >= recv_total_) return {};
    return {buffer_ + received_, recv_total_ - received_};
  }
  void OnReceived(size_t n) override { received_ += n; }

 private:
  uint8_t* const buffer_;
  const size_t bytes_;
  const size_t recv_total_;
  const size_t send_total_;
  size_t received_;  // bytes final in the buffer (all of them on the root)
  size_t sent_ = 0;
};

}  // namespace

ChainLinks BroadcastChain(int rank, int size, int root) {
  ChainLinks links;
  const int position = (rank - root + size) % size;  // 0 for the root
  if (position > 0) links.recv_from = (rank - 1 + size) % size;
  if (position < size - 1) links.send_to = (rank + 1) % size;
  return links;
}

Status ChainBroadcast(DataPlane& plane, void* buffer, size_t bytes, int root,
                      const std::string& what) {
  if (plane.size() == 1 || bytes == 0) return Status::Ok();
  const ChainLinks links = BroadcastChain(plane.rank(), plane.size(), root);
  ChainExchange exchange(static_cast<uint8_t*>(buffer), bytes, links.recv_from >= 0,
                         links.send_to >= 0);
  return plane.Exchange(links.send_to, links.recv_from, exchange, what);
}

}  // namespace kolo::ops
