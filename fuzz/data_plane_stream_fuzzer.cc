// Fuzz target: what the CPU collectives (ops/) do with the bytes that arrive on data sockets.
// kolo's data streams carry raw elements with no framing; the decoders are the StreamExchanges
// of the ring allreduce and reducescatter (which reduce received elements into the buffer),
// the ring allgather and chain broadcast (which write and forward them) and the pairwise
// alltoall. The input picks the collective, dtype, op, ring position and sizes, then the piece
// sizes in which bytes move and the received bytes themselves. StreamDriver plays the
// DataPlane the way transport/tcp/stream_pump.cc does and checks the StreamExchange contract
// (core/data_plane.h): a receive region while receiving is incomplete, no stall, no byte past
// the totals; ASan checks that nothing is read or written outside the buffers. Broadcast and
// allgather results are compared with the bytes received.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/data_plane.h"
#include "fuzz/fuzz_input.h"
#include "ops/chain_broadcast.h"
#include "ops/pairwise_alltoall.h"
#include "ops/ring_allgather.h"
#include "ops/ring_allreduce.h"
#include "ops/ring_reducescatter.h"

namespace kolo::ops {
namespace {

// A DataPlane whose peers are the fuzzer: every Exchange receives bytes from `in` (zeros once
// it runs out) in the input's piece sizes, and records both streams.
class StreamDriver final : public DataPlane {
 public:
  StreamDriver(int rank, int size, fuzz::FuzzInput* in) : rank_(rank), size_(size), in_(in) {
    const size_t plan = 1 + in->Byte() % 8;
    for (size_t i = 0; i < plan; ++i) {
      const uint8_t b = in->Byte();
      pieces_.push_back(b == 0 ? 4096 : b);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Interrupt(const Status&) override {}

  Status Exchange(int send_to, int recv_from, StreamExchange& exchange,
                  const std::string& what) override {
    ++exchanges_;
    const size_t send_total = exchange.send_total();
    const size_t recv_total = exchange.recv_total();
    KOLO_FUZZ_CHECK(send_to != rank_ && recv_from != rank_, "%s: exchange with itself",
                    what.c_str());
    KOLO_FUZZ_CHECK(send_to >= -1 && send_to < size_ && recv_from >= -1 && recv_from < size_,
                    "%s: peers %d, %d", what.c_str(), send_to, recv_from);
    KOLO_FUZZ_CHECK(send_to >= 0 || send_total == 0, "%s: sends to nobody", what.c_str());
    KOLO_FUZZ_CHECK(recv_from >= 0 || recv_total == 0, "%s: receives from nobody", what.c_str());
    size_t sent = 0;
    size_t received = 0;
    while (sent < send_total || received < recv_total) {
      bool progress = false;
      if (received < recv_total) {
        const MutableBytes region = exchange.NextRecv();
        KOLO_FUZZ_CHECK(region.size > 0 && region.data != nullptr,
                        "%s: no receive region with %zu bytes to go", what.c_str(),
                        recv_total - received);
        const size_t n = std::min({region.size, NextPiece(), recv_total - received});
        std::string bytes = in_->Bytes(n);
        bytes.resize(n, '\0');
        std::memcpy(region.data, bytes.data(), n);
        received_ += bytes;
        received += n;
        exchange.OnReceived(n);
        progress = true;
      }
      if (sent < send_total) {
        const ConstBytes ready = exchange.NextSend();
        if (ready.size > 0) {
          KOLO_FUZZ_CHECK(ready.data != nullptr, "%s: null send region", what.c_str());
          const size_t n = std::min({ready.size, NextPiece(), send_total - sent});
          sent_.append(static_cast<const char*>(ready.data), n);
          sent += n;
          exchange.OnSent(n);
          progress = true;
        }
      }
      KOLO_FUZZ_CHECK(progress, "%s: stalled with %zu bytes to send and none ready", what.c_str(),
                      send_total - sent);
    }
    KOLO_FUZZ_CHECK(exchange.NextRecv().size == 0, "%s: a receive region after the end",
                    what.c_str());
    return Status::Ok();
  }

  const std::string& sent() const { return sent_; }
  const std::string& received() const { return received_; }
  int exchanges() const { return exchanges_; }

 private:
  size_t NextPiece() { return pieces_[piece_++ % pieces_.size()]; }

  const int rank_;
  const int size_;
  fuzz::FuzzInput* const in_;
  std::vector<size_t> pieces_;
  size_t piece_ = 0;
  std::string sent_;
  std::string received_;
  int exchanges_ = 0;
};

constexpr size_t kMaxElements = 3000;

void Allreduce(fuzz::FuzzInput& shape, StreamDriver& plane, DataType dtype, ReduceOp op) {
  const size_t count = shape.Range(0, kMaxElements);
  RingScratch scratch(shape.Range(0, 1024));
  std::vector<uint8_t> buffer(count * DataTypeSize(dtype), 0x5a);
  const Status status = RingAllreduce(plane, buffer.data(), count, dtype, op, scratch, "fuzz");
  KOLO_FUZZ_CHECK(status.ok(), "%s", status.ToString().c_str());
  const size_t expect = plane.size() > 1 ? 2 * (plane.size() - 1) : 0;
  KOLO_FUZZ_CHECK(count == 0 || plane.exchanges() == (expect > 0 ? 1 : 0), "%d exchanges",
                  plane.exchanges());
}

void Reducescatter(fuzz::FuzzInput& shape, StreamDriver& plane, DataType dtype, ReduceOp op) {
  const int64_t rows = static_cast<int64_t>(shape.Range(0, 64));
  const int64_t row_elements = static_cast<int64_t>(shape.Range(0, 40));
  RingScratch scratch(shape.Range(0, 1024));
  std::vector<uint8_t> buffer(rows * row_elements * DataTypeSize(dtype), 0x5a);
  const Status status =
      RingReducescatter(plane, buffer.data(), rows, row_elements, dtype, op, scratch, "fuzz");
  KOLO_FUZZ_CHECK(status.ok(), "%s", status.ToString().c_str());
}

void Allgather(fuzz::FuzzInput& shape, StreamDriver& plane) {
  const int n = plane.size();
  const int r = plane.rank();
  std::vector<size_t> blocks, offsets;
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    offsets.push_back(total);
    blocks.push_back(shape.Range(0, 2000));
    total += blocks.back();
  }
  std::vector<char> output(total, 0);
  for (size_t i = 0; i < blocks[r]; ++i) output[offsets[r] + i] = static_cast<char>(i * 7 + 1);
  const std::string own(output.data() + offsets[r], blocks[r]);
  const Status status = RingAllgather(plane, output.data(), blocks, "fuzz");
  KOLO_FUZZ_CHECK(status.ok(), "%s", status.ToString().c_str());
  if (n == 1) return;
  // Received: blocks r-1, r-2, ..., r-n+1 in that order; sent: own block, then each received
  // block but the last.
  std::string expect_received, expect_sent = own;
  for (int s = 0; s < n - 1; ++s) {
    const int b = ((r - s - 1) % n + n) % n;
    const std::string block(output.data() + offsets[b], blocks[b]);
    expect_received += block;
    if (s < n - 2) expect_sent += block;
  }
  KOLO_FUZZ_CHECK(std::string(output.data() + offsets[r], blocks[r]) == own, "own block changed");
  KOLO_FUZZ_CHECK(plane.received() == expect_received, "received bytes are not in place");
  KOLO_FUZZ_CHECK(plane.sent() == expect_sent, "forwarded bytes differ from those received");
}

void Broadcast(fuzz::FuzzInput& shape, StreamDriver& plane) {
  const size_t bytes = shape.Range(0, 20000);
  const int root = static_cast<int>(shape.Range(0, plane.size() - 1));
  std::vector<char> buffer(bytes, 'r');
  const Status status = ChainBroadcast(plane, buffer.data(), bytes, root, "fuzz");
  KOLO_FUZZ_CHECK(status.ok(), "%s", status.ToString().c_str());
  const std::string result(buffer.data(), bytes);
  const ChainLinks links = BroadcastChain(plane.rank(), plane.size(), root);
  if (plane.rank() == root || plane.size() == 1) {
    KOLO_FUZZ_CHECK(plane.received().empty(), "the root received %zu bytes",
                    plane.received().size());
    KOLO_FUZZ_CHECK(result == std::string(bytes, 'r'), "the root's buffer changed");
  } else {
    KOLO_FUZZ_CHECK(plane.received() == result, "buffer differs from the bytes received");
  }
  if (links.send_to >= 0 && bytes > 0) {
    KOLO_FUZZ_CHECK(plane.sent() == result, "forwarded bytes differ from the buffer");
  } else {
    KOLO_FUZZ_CHECK(plane.sent().empty(), "the end of the chain sent %zu bytes",
                    plane.sent().size());
  }
}

void Alltoall(fuzz::FuzzInput& shape, StreamDriver& plane) {
  const int n = plane.size();
  std::vector<ByteBlock> send(n), recv(n);
  size_t in_total = 0, out_total = 0;
  for (int d = 0; d < n; ++d) {
    send[d] = ByteBlock{in_total, shape.Range(0, 1000)};
    in_total += send[d].bytes;
    recv[d] = ByteBlock{out_total, d == plane.rank() ? send[d].bytes : shape.Range(0, 1000)};
    out_total += recv[d].bytes;
  }
  std::vector<char> input(in_total, 'i'), output(out_total, 'o');
  const Status status = PairwiseAlltoall(plane, input.data(), send, output.data(), recv, "fuzz");
  KOLO_FUZZ_CHECK(status.ok(), "%s", status.ToString().c_str());
  size_t expect_sent = 0;
  for (int d = 0; d < n; ++d) expect_sent += d == plane.rank() ? 0 : send[d].bytes;
  KOLO_FUZZ_CHECK(plane.sent().size() == expect_sent, "sent %zu bytes, expected %zu",
                  plane.sent().size(), expect_sent);
}

}  // namespace
}  // namespace kolo::ops

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kolo;
  // The first 16 bytes describe the collective; the rest is the piece plan and the stream.
  const size_t header = size < 16 ? size : 16;
  fuzz::FuzzInput shape(data, header);
  fuzz::FuzzInput stream(data + header, size - header);
  const int collective = shape.Byte() % 5;
  const auto dtype = static_cast<DataType>(shape.Byte() % kNumDataTypes);
  const auto op = static_cast<ReduceOp>(shape.Byte() % 5);
  const int ranks = static_cast<int>(shape.Range(1, 8));
  const int rank = static_cast<int>(shape.Range(0, ranks - 1));
  ops::StreamDriver plane(rank, ranks, &stream);
  switch (collective) {
    case 0:
      ops::Allreduce(shape, plane, dtype, op);
      break;
    case 1:
      ops::Reducescatter(shape, plane, dtype, op);
      break;
    case 2:
      ops::Allgather(shape, plane);
      break;
    case 3:
      ops::Broadcast(shape, plane);
      break;
    default:
      ops::Alltoall(shape, plane);
      break;
  }
  return 0;
}
