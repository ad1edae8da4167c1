#include "ops/pairwise_alltoall.h"

#include <cstdint>
#include <cstring>

namespace kolo::ops {
namespace {

// One step: a whole block out, a whole block in; nothing depends on anything else.
class PairExchange final : public StreamExchange {
 public:
  PairExchange(const uint8_t* send, size_t send_bytes, uint8_t* recv, size_t recv_bytes)
      : send_(send), send_bytes_(send_bytes), recv_(recv), recv_bytes_(recv_bytes) {}
  size_t send_total() const override { return send_bytes_; }
  size_t recv_total() const override { return recv_bytes_; }
  ConstBytes NextSend() override { return {send_ + sent_, send_bytes_ - sent_}; }
  void OnSent(size_t n) override { sent_ += n; }
  MutableBytes NextRecv() override { return {recv_ + received_, recv_bytes_ - received_}; }
  void OnReceived(size_t n) override { received_ += n; }

 private:
  const uint8_t* const send_;
  const size_t send_bytes_;
  uint8_t* const recv_;
  const size_t recv_bytes_;
  size_t sent_ = 0;
  size_t received_ = 0;
};

}  // namespace

Status PairwiseAlltoall(DataPlane& plane, const void* input, const std::vector<ByteBlock>& send,
                        void* output, const std::vector<ByteBlock>& recv, const std::string& what) {
  const int n = plane.size();
  const int r = plane.rank();
  const uint8_t* in = static_cast<const uint8_t*>(input);
  uint8_t* out = static_cast<uint8_t*>(output);
  if (send[r].bytes > 0) std::memcpy(out + recv[r].offset, in + send[r].offset, send[r].bytes);
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n;
    const int from = (r - k + n) % n;
    PairExchange exchange(in + send[to].offset, send[to].bytes, out + recv[from].offset,
                          recv[from].bytes);
    KOLO_RETURN_IF_ERROR(plane.Exchange(send[to].bytes > 0 ? to : -1,
                                        recv[from].bytes > 0 ? from : -1, exchange, what));
  }
  return Status::Ok();
}

}  // namespace kolo::ops
