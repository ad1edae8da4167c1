// Unit tests of the controller's listen address (transport/grpc/listen_address.h): real sockets
// on loopback.
#include "transport/grpc/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <string>

namespace kolo::transport {
namespace {

bool ConnectsOverIpv4(int port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
}

bool ConnectsAbstract(const std::string& name) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return connect(fd.get(), reinterpret_cast<sockaddr*>(&address), length) == 0;
}

TEST_CASE("ListenOn binds a unix-abstract name, and a name in use fails in one sentence",
          "[transport][front-door]") {
  const std::string name = "kolo-listen-test-" + std::to_string(getpid());
  const std::string address = "unix-abstract:" + name;
  CHECK(IsUnixAbstractAddress(address));
  CHECK_FALSE(IsUnixAbstractAddress("127.0.0.1:0"));
  CHECK_FALSE(ConnectsAbstract(name));
  int port = -1;
  StatusOr<std::vector<UniqueFd>> first = ListenOn(address, &port);
  REQUIRE(first.ok());
  CHECK(first->size() == 1);
  CHECK(port == 0);
  CHECK(ConnectsAbstract(name));
  StatusOr<std::vector<UniqueFd>> second = ListenOn(address, &port);
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().message().find("in use") != std::string::npos);
  CHECK_FALSE(ListenOn("unix-abstract:", &port).ok());
}

TEST_CASE("ListenOn picks a port, and a port in use fails in one sentence",
          "[transport][front-door]") {
  int port = 0;
  StatusOr<std::vector<UniqueFd>> first = ListenOn("127.0.0.1:0", &port);
  REQUIRE(first.ok());
  CHECK(first->size() == 1);
  CHECK(port > 0);
  CHECK(ConnectsOverIpv4(port));

  int again = 0;
  const std::string address = "127.0.0.1:" + std::to_string(port);
  StatusOr<std::vector<UniqueFd>> second = ListenOn(address, &again);
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().message() ==
        "the controller cannot listen on " + address + ": address in use (port " +
            std::to_string(port) +
            " is taken by another job's controller or another program); choose another port "
            "in KOLO_CONTROLLER");
  CHECK(ProbeListenAddress(address).message() == second.status().message());

  int none = 0;
  CHECK_FALSE(ListenOn("no-port-here", &none).ok());
}

TEST_CASE("An empty host listens on every address, IPv4 included", "[transport][front-door]") {
  int port = 0;
  StatusOr<std::vector<UniqueFd>> every = ListenOn(":0", &port);
  REQUIRE(every.ok());
  CHECK(port > 0);
  CHECK(ConnectsOverIpv4(port));

  // "[::]" alone stays dual-stack, as gRPC's listener bound it.
  int v6_port = 0;
  StatusOr<std::vector<UniqueFd>> v6 = ListenOn("[::]:0", &v6_port);
  if (!v6.ok()) {
    WARN("no IPv6 on this host: " << v6.status().message());
    return;
  }
  CHECK(ConnectsOverIpv4(v6_port));
}

}  // namespace
}  // namespace kolo::transport
