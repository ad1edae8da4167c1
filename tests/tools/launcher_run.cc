#include "tests/tools/launcher_run.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <sstream>

namespace kolo::testing {
namespace {

// A socket bound to 127.0.0.1:port (0: any), or -1.
int BindLoopback(int port, int* bound_port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

bool InPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

int FreeLoopbackPort() {
  int port = 0;
  int fd = BindLoopback(0, &port);
  if (fd >= 0) close(fd);
  return port;
}

PortHolder::PortHolder(int port) {
  int bound = 0;
  fd_ = BindLoopback(port, &bound);
  if (fd_ >= 0 && listen(fd_, 16) == 0) port_ = bound;
}

PortHolder::~PortHolder() {
  if (fd_ >= 0) close(fd_);
}

std::vector<ProcessResult> RunRanks(const std::vector<std::string>& argv,
                                    const std::vector<std::vector<std::string>>& rank_envs) {
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (const std::vector<std::string>& env : rank_envs) {
    ranks.push_back(std::make_unique<ChildProcess>(argv, env));
  }
  std::vector<ProcessResult> results;
  for (auto& rank : ranks) results.push_back(rank->Wait());
  return results;
}

}  // namespace kolo::testing
