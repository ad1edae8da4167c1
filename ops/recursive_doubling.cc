#include "ops/recursive_doubling.h"

#include <cstring>

#include "ops/reduce_kernels.h"

namespace kolo::ops {
namespace {

// One step: the whole buffer out to the partner, the partner's whole buffer into the scratch.
class SwapExchange final : public StreamExchange {
 public:
  SwapExchange(const SegmentedBuffer& buffer, uint8_t* scratch)
      : buffer_(buffer), scratch_(scratch), total_(buffer.total()) {}

  size_t send_total() const override { return total_; }
  size_t recv_total() const override { return total_; }
  ConstBytes NextSend() override {
    if (sent_ == total_) return {};
    const SegmentedBuffer::Span span = buffer_.Locate(sent_);
    return {span.data, span.bytes};
  }
  void OnSent(size_t n) override { sent_ += n; }
  MutableBytes NextRecv() override { return {scratch_ + received_, total_ - received_}; }
  void OnReceived(size_t n) override { received_ += n; }

 private:
  const SegmentedBuffer& buffer_;
  uint8_t* const scratch_;
  const size_t total_;
  size_t sent_ = 0;
  size_t received_ = 0;
};

// buffer = (lower rank's operand) op (higher rank's operand), piece by piece. Both partners run
// the same Reduce with the same operand in each role (the lower rank's data as dst), so they
// compute the same bits even where the order shows (NaN payloads); the higher rank reduces into
// the scratch and copies the result back.
void ReduceInOrder(const SegmentedBuffer& buffer, uint8_t* received, bool own_first, DataType dtype,
                   ReduceOp op) {
  const size_t element_size = DataTypeSize(dtype);
  for (size_t done = 0; done < buffer.total();) {
    const SegmentedBuffer::Span span = buffer.Locate(done);
    const size_t count = span.bytes / element_size;
    if (own_first) {
      Reduce(span.data, received + done, count, dtype, op);
    } else {
      Reduce(received + done, span.data, count, dtype, op);
      std::memcpy(span.data, received + done, span.bytes);
    }
    done += span.bytes;
  }
}

}  // namespace

bool IsPowerOfTwo(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

Status RecursiveDoublingAllreduce(DataPlane& plane, const SegmentedBuffer& buffer, DataType dtype,
                                  ReduceOp op, RingScratch& scratch, const std::string& what) {
  const int n = plane.size();
  if (buffer.total() == 0 || n == 1) return Status::Ok();
  if (DataTypeSize(dtype) == 0) {
    return InvalidArgument(what + ": unsupported dtype " + DataTypeName(dtype));
  }
  if (!IsPowerOfTwo(n)) {
    return InvalidArgument(what +
                           ": recursive doubling needs a power-of-two number of ranks, not " +
                           std::to_string(n));
  }
  if (buffer.total() > scratch.size()) {
    return InvalidArgument(what + ": " + std::to_string(buffer.total()) +
                           " bytes do not fit the recursive-doubling scratch of " +
                           std::to_string(scratch.size()));
  }
  const int rank = plane.rank();
  for (int distance = 1; distance < n; distance *= 2) {
    const int partner = rank ^ distance;
    SwapExchange exchange(buffer, scratch.data());
    KOLO_RETURN_IF_ERROR(plane.Exchange(partner, partner, exchange, what));
    ReduceInOrder(buffer, scratch.data(), /*own_first=*/rank < partner, dtype, op);
  }
  return Status::Ok();
}

}  // namespace kolo::ops
