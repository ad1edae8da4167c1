#include "tools/scale/process_sample.h"

#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kolo::scale {

ProcessSample SampleSelf() {
  ProcessSample sample;
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  sample.cpu_ns = static_cast<int64_t>(cpu.tv_sec) * 1000000000 + cpu.tv_nsec;
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") status >> sample.rss_kb;
    if (key == "Threads:") status >> sample.threads;
    status.ignore(1 << 16, '\n');
  }
  return sample;
}

std::string SampleText(const ProcessSample& sample) {
  return std::to_string(sample.cpu_ns) + " " + std::to_string(sample.rss_kb) + " " +
         std::to_string(sample.threads);
}

StatusOr<ProcessSample> ParseSample(const std::string& text) {
  ProcessSample sample;
  std::istringstream in(text);
  if (!(in >> sample.cpu_ns >> sample.rss_kb >> sample.threads)) {
    return Internal("the controller process answered '" + text + "', not 'cpu_ns rss_kb threads'");
  }
  return sample;
}

Status WriteLine(int fd, const std::string& line, const std::string& what) {
  const std::string out = line + "\n";
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = write(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable(what + " is gone (" + std::strerror(errno) + ")");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadLine(int fd, std::chrono::steady_clock::time_point deadline,
                               const std::string& what) {
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return DeadlineExceeded("no answer from " + what + " before the deadline");
    char c = 0;
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable(what + " closed its pipe");
    if (c == '\n') return line;
    line.push_back(c);
  }
}

}  // namespace kolo::scale
