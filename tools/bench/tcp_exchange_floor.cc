// tcp_exchange_floor: the plain exchange under a 2-rank allreduce of N bytes over TCP loopback
// (N bytes each way at once), without kolo: two processes (fork), one thread each, swap N bytes
// on one socket, nonblocking, in a busy poll loop as kolo's pump runs (send() and recv() calls
// of at most CALL bytes), and time each swap; no reduction, slicing or control messages. A
// reference for docs/PERFORMANCE.md (issue 58 item 1); it uses nothing of kolo's:
//
//   [FLOOR_TWO=1] build/bin/kolo-tcp-exchange-floor BYTES [ITERS=20] [CALL=262144] [hot|cold]
//   [SOCKBUF]
//
// cold (default): each side sends from and receives into its own N-byte buffers, rewritten
// before every swap as kolo-bench refills its buffer; hot: both buffers are CALL bytes, reused
// (the stream of /work/shared/bench/tcp_loopback.cc). SOCKBUF: SO_SNDBUF and SO_RCVBUF (4 MiB,
// kolo's). FLOOR_TWO=1: a connection per direction instead of one for both. Prints the median
// and min over ITERS swaps (after 3 untimed ones) of the slower side's time.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double NowUs() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

void Die(const char* what) {
  perror(what);
  _exit(1);
}

void SetOptions(int fd, int sockbuf) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (sockbuf > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof sockbuf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf);
  }
}

// Blocking exchange of one byte each way: the barrier before each timed swap.
void Barrier(int fd, int rfd) {
  char b = 1;
  fcntl(rfd, F_SETFL, 0);
  if (send(fd, &b, 1, 0) != 1 || recv(rfd, &b, 1, MSG_WAITALL) != 1) Die("barrier");
  fcntl(rfd, F_SETFL, O_NONBLOCK);
  fcntl(fd, F_SETFL, O_NONBLOCK);
}

// Sends and receives `bytes` at once; `hot` reuses `call`-byte windows of the buffers.
void Swap(int fd, int rfd, char* out, char* in, size_t bytes, size_t call, bool hot) {
  size_t sent = 0, received = 0;
  while (sent < bytes || received < bytes) {
    pollfd p[2] = {{rfd, static_cast<short>(received < bytes ? POLLIN : 0), 0},
                   {fd, static_cast<short>(sent < bytes ? POLLOUT : 0), 0}};
    if (rfd == fd) p[0].events |= p[1].events;
    if (poll(p, rfd == fd ? 1 : 2, 0) == 0) continue;  // busy polling, as kolo's pump
    if (received < bytes && (p[0].revents & POLLIN)) {
      const size_t want = std::min(call, bytes - received);
      const ssize_t n = recv(rfd, hot ? in : in + received, want, 0);
      if (n == 0) Die("peer closed");
      if (n > 0)
        received += static_cast<size_t>(n);
      else if (errno != EAGAIN)
        Die("recv");
    }
    if (sent < bytes) {
      const size_t want = std::min(call, bytes - sent);
      const ssize_t n = send(fd, hot ? out : out + sent, want, MSG_NOSIGNAL);
      if (n > 0)
        sent += static_cast<size_t>(n);
      else if (n < 0 && errno != EAGAIN)
        Die("send");
    }
  }
}

std::vector<double> Run(int fd, int rfd, size_t bytes, int iters, size_t call, bool hot) {
  const size_t buffer = hot ? call : bytes;
  std::vector<char> out(buffer), in(buffer);
  std::vector<double> times;
  for (int i = 0; i < iters + 3; ++i) {
    if (!hot) {
      std::memset(out.data(), i, buffer);  // the refill, as kolo-bench's before each op
    }
    Barrier(fd, rfd);
    const double t0 = NowUs();
    Swap(fd, rfd, out.data(), in.data(), bytes, call, hot);
    if (i >= 3) times.push_back(NowUs() - t0);
  }
  return times;
}

// Forks; returns fork()'s result, with the socket to send on and the one to receive on (the
// same one unless FLOOR_TWO is set: then a connection per direction, the parent sending on the
// first and the child on the second).
pid_t ConnectPair(int sockbuf, int* fd, int* rfd) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  SetOptions(listener, sockbuf);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) Die("bind");
  if (listen(listener, 2) < 0) Die("listen");
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &length);
  const pid_t child = fork();
  const bool two = getenv("FLOOR_TWO") != nullptr;
  int fds[2] = {-1, -1};
  for (int k = 0; k < (two ? 2 : 1); ++k) {
    if (child == 0) {
      fds[k] = socket(AF_INET, SOCK_STREAM, 0);
      SetOptions(fds[k], sockbuf);
      if (connect(fds[k], reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) Die("connect");
    } else {
      fds[k] = accept(listener, nullptr, nullptr);
      if (fds[k] < 0) Die("accept");
      SetOptions(fds[k], sockbuf);
    }
  }
  *fd = two && child == 0 ? fds[1] : fds[0];
  *rfd = two ? (child == 0 ? fds[0] : fds[1]) : *fd;
  fcntl(*rfd, F_SETFL, O_NONBLOCK);
  return child;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s BYTES [ITERS] [CALL] [hot|cold] [SOCKBUF]\n", argv[0]);
    return 2;
  }
  const size_t bytes = strtoull(argv[1], nullptr, 10);
  const int iters = argc > 2 ? atoi(argv[2]) : 20;
  const size_t call = argc > 3 ? strtoull(argv[3], nullptr, 10) : 262144;
  const bool hot = argc > 4 && std::string(argv[4]) == "hot";
  const int sockbuf = argc > 5 ? atoi(argv[5]) : 4 << 20;

  int fd = -1, rfd = -1, results[2];
  if (pipe(results) < 0) Die("pipe");
  const pid_t child = ConnectPair(sockbuf, &fd, &rfd);
  std::vector<double> times = Run(fd, rfd, bytes, iters, call, hot);
  if (child == 0) {
    if (write(results[1], times.data(), times.size() * sizeof(double)) < 0) Die("write");
    _exit(0);
  }
  std::vector<double> peer(times.size());
  if (read(results[0], peer.data(), peer.size() * sizeof(double)) !=
      static_cast<ssize_t>(peer.size() * sizeof(double))) {
    Die("read");
  }
  waitpid(child, nullptr, 0);
  for (size_t i = 0; i < times.size(); ++i) times[i] = std::max(times[i], peer[i]);
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  printf(
      "tcp_exchange_floor %zu bytes each way, %s, call %zu, sockbuf %d: median %.0f us "
      "(%.3f GB/s each way), min %.0f us\n",
      bytes, hot ? "hot" : "cold", call, sockbuf, median, bytes / median / 1e3, times.front());
  return 0;
}
