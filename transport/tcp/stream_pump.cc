#include "transport/tcp/stream_pump.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "core/clock.h"
#include "core/errno_status.h"
#include "core/spin_wait.h"
#include "transport/deadline.h"
#include "transport/tcp/tcp_socket.h"

namespace kolo::transport {
namespace {

// Bytes moved in one direction before turning to the other, so that received data can be
// processed and sent on while more arrives (pipelining, DESIGN.md §3). Where the peer's data
// arrives on the socket we send on, a pass moves at most one send call (below) each way.
constexpr size_t kPassBudget = 1 << 20;

// Largest send() when the peer's data arrives on the same socket (2 ranks' ring, pairwise
// exchanges). While send() runs it owns the socket, and the kernel parks the peer's incoming
// segments on the socket's backlog, to process them (and the acknowledgements that release our
// own next segments) only when the call returns; a 1 MiB call let a megabyte pile up there,
// cold by the time it was processed. Measured on loopback, 2 ranks, --raw: 2 and 4 MiB
// allreduces 1.9x faster with 256 KiB calls (4 MiB 605-720 against 1125-1200 us), 1 MiB and
// below unchanged, 8 and 32 MiB within 2%, but 16 MiB 3-8% slower in five interleaved pairs,
// hence the limit on the exchange's size (docs/PERFORMANCE.md "TCP data plane tuning"). Only
// where the ranks have a core each (busy_poll): with 4 ranks on 2 cores the peers take turns
// instead of streaming at once, and 256 KiB calls made 2-8 MiB 8-15% slower there.
// The same bound holds each pass in both directions: receiving up to 1 MiB before turning to
// send left the peer waiting for our next bytes while we drained its. Measured on the Intel
// Xeon kind, 2 ranks, through the API, 4-5 interleaved repetitions: 1 / 4 / 16 / 64 MiB 2-4%,
// 7-8%, 8% and 13% faster than with 1 MiB passes; 128 and 64 KiB passes were slower than
// 256 KiB ones (docs/PERFORMANCE.md, "TCP on the Intel Xeon kind").
constexpr size_t kSharedSocketSendCall = size_t{256} << 10;
constexpr size_t kSharedSocketSendCallUpTo = size_t{8} << 20;  // bytes the exchange sends

// After the last byte moved, poll without sleeping for a while before blocking in poll(). A
// blocked rank is woken through the scheduler by its peer's softirq, which on this loopback
// costs ~25 us a wake-up against ~4 us polled (docs/PERFORMANCE.md), and every step of an
// allreduce waits on a peer. The budgets count time on the core (core/spin_wait.h): a rank
// preempted by a busy host's other processes still polls when it gets its core back. Between
// polls it keeps the core (busy_poll is on only where every rank of the host has one): a
// sched_yield() there handed the core to whatever else was runnable for a whole time slice
// (docs/PERFORMANCE.md, "On a busy machine"). On kolo's own thread, which runs ops while the
// application computes, both budgets are at most kBackgroundPoll (core/spin_wait.h). Until
// the first
// byte arrives the peer may not have started at all (through the API ranks reach an op
// hundreds of us apart), and spinning then takes the core from the very threads it waits for:
// measured, 1 ms before the first byte made 4-64 KiB allreduces through the API 20-50% slower,
// 100 us cost nothing there and still gave most of the raw data-plane gain.
constexpr std::chrono::microseconds kSpinBeforeFirstByte{100};
constexpr std::chrono::microseconds kSpinBeforeBlocking{1000};

class Pump {
 public:
  Pump(const PumpEnds& ends, StreamExchange& exchange, const std::string& what)
      : ends_(ends),
        exchange_(exchange),
        what_(what),
        send_total_(exchange.send_total()),
        recv_total_(exchange.recv_total()),
        pass_bytes_(ends.busy_poll && ends.send_fd == ends.recv_fd &&
                            send_total_ <= kSharedSocketSendCallUpTo
                        ? kSharedSocketSendCall
                        : kPassBudget) {}

  Status Run();

 private:
  bool sending() const { return sent_ < send_total_; }
  bool receiving() const { return received_ < recv_total_; }
  Status ReceiveSome(bool* progress);
  Status SendSome(bool* progress);
  Status PeerError(int peer, int err, const char* direction) const;
  Status NoProgress() const;

  const PumpEnds& ends_;
  StreamExchange& exchange_;
  const std::string& what_;
  const size_t send_total_;
  const size_t recv_total_;
  const size_t pass_bytes_;  // bytes a pass moves each way at most, and the largest send()
  size_t sent_ = 0;
  size_t received_ = 0;
};

Status Pump::Run() {
  SteadyTime last_progress = std::chrono::steady_clock::now();
  const auto timeout = SecondsToDuration(ends_.timeout_seconds);
  const auto no_spin = std::chrono::microseconds::zero();
  PollBudget spin_left(ends_.busy_poll ? ThisThreadPollBudget(kSpinBeforeFirstByte) : no_spin);
  while (sending() || receiving()) {
    const bool send_ready = sending() && exchange_.NextSend().size > 0;
    if (sending() && !send_ready && !receiving()) {
      return Internal(what_ + ": exchange stalled: " + std::to_string(send_total_ - sent_) +
                      " bytes left to send, none ready, and nothing left to receive");
    }
    pollfd fds[3] = {{ends_.interrupt_fd, POLLIN, 0}, {-1, 0, 0}, {-1, 0, 0}};
    if (receiving()) fds[1] = {ends_.recv_fd, POLLIN, 0};
    if (send_ready) {
      pollfd& slot = ends_.send_fd == ends_.recv_fd && receiving() ? fds[1] : fds[2];
      slot.fd = ends_.send_fd;
      slot.events |= POLLOUT;
    }
    const bool spin = !spin_left.Spent();
    const int rc =
        poll(fds, 3,
             spin ? 0 : PollTimeoutMs(std::chrono::steady_clock::now(), last_progress + timeout));
    if (rc < 0 && errno != EINTR) return ErrnoToStatus(errno, what_ + ": poll()");
    if (rc == 0 && spin) {
      CpuRelax();
      continue;
    }
    if (fds[0].revents != 0) return ends_.interrupt_status();
    bool progress = false;
    if (receiving() && fds[1].revents != 0) KOLO_RETURN_IF_ERROR(ReceiveSome(&progress));
    // Receiving may have made bytes ready to send; trying costs one EAGAIN at worst.
    if (sending()) KOLO_RETURN_IF_ERROR(SendSome(&progress));
    if (progress) {
      last_progress = std::chrono::steady_clock::now();
      const auto next = received_ > 0 ? kSpinBeforeBlocking : kSpinBeforeFirstByte;
      spin_left = PollBudget(ends_.busy_poll ? ThisThreadPollBudget(next) : no_spin);
    } else if (std::chrono::steady_clock::now() >= last_progress + timeout) {
      return NoProgress();
    }
  }
  return Status::Ok();
}

Status Pump::ReceiveSome(bool* progress) {
  size_t moved = 0;
  while (receiving() && moved < pass_bytes_) {
    MutableBytes region = exchange_.NextRecv();
    if (region.size == 0) {
      return Internal(what_ + ": the exchange offers no receive buffer with " +
                      std::to_string(recv_total_ - received_) + " bytes still to receive");
    }
    const size_t want = std::min({region.size, recv_total_ - received_, pass_bytes_ - moved});
    IoResult io = RecvSome(ends_.recv_fd, region.data, want);
    if (io.eof) return PeerError(ends_.recv_peer, ECONNRESET, "receiving from");
    if (io.error != 0) return PeerError(ends_.recv_peer, io.error, "receiving from");
    if (io.would_block()) break;
    received_ += io.bytes;
    moved += io.bytes;
    *progress = true;
    exchange_.OnReceived(io.bytes);
  }
  return Status::Ok();
}

Status Pump::SendSome(bool* progress) {
  size_t moved = 0;
  while (sending() && moved < pass_bytes_) {
    ConstBytes ready = exchange_.NextSend();
    if (ready.size == 0) break;
    const size_t want = std::min({ready.size, send_total_ - sent_, pass_bytes_ - moved});
    IoResult io = transport::SendSome(ends_.send_fd, ready.data, want);
    if (io.error != 0) return PeerError(ends_.send_peer, io.error, "sending to");
    if (io.would_block()) break;
    sent_ += io.bytes;
    moved += io.bytes;
    *progress = true;
    exchange_.OnSent(io.bytes);
  }
  return Status::Ok();
}

Status Pump::PeerError(int peer, int err, const char* direction) const {
  if (IsConnectionClosed(err)) {
    return Unavailable(what_ + ": rank " + std::to_string(peer) + " closed the connection");
  }
  return ErrnoToStatus(err, what_ + ": " + direction + " rank " + std::to_string(peer));
}

Status Pump::NoProgress() const {
  const std::string limit =
      ": timed out after " + SecondsText(ends_.timeout_seconds) + " (KOLO_TIMEOUT_SECONDS)";
  if (receiving()) {
    return DeadlineExceeded(what_ + ": no data from rank " + std::to_string(ends_.recv_peer) +
                            limit);
  }
  return DeadlineExceeded(what_ + ": rank " + std::to_string(ends_.send_peer) +
                          " accepted no data" + limit);
}

}  // namespace

Status PumpExchange(const PumpEnds& ends, StreamExchange& exchange, const std::string& what) {
  return Pump(ends, exchange, what).Run();
}

}  // namespace kolo::transport
