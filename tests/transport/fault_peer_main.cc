// fault_peer: the other process of the transport fault tests (tests/transport/fault_test.cc),
// which SIGKILL or SIGSTOP it. Talks to the test over stdin/stdout lines.
//   fault_peer mesh <timeout_seconds>: rank 1 of a 2-rank TcpMesh. Prints "ADDR <address>",
//     reads rank 0's address, connects, prints "CONNECTED", then streams bytes to rank 0.
//   fault_peer control <controller_address> <rank>: a GrpcControlChannel worker. Prints
//     "WELCOMED" after Connect, then waits for stdin to close and shuts down cleanly.
//   fault_peer controller: a GrpcControlServer that welcomes one rank. Prints "PORT <port>",
//     then serves until stdin closes.
//   fault_peer shm-creator <size>: rank 0 of a <size>-rank TcpMesh. Prints "ADDR <address>",
//     reads the other ranks' addresses (one line, space-separated), connects, prints
//     "CONNECTED", then creates the ShmMesh (rank 0 makes the segment and waits for every rank
//     to map it: the test kills it in that window) and prints "SHM <status>".
//   fault_peer shm-single-copy: rank 1 of a 2-rank TcpMesh and ShmMesh with single copy on.
//     Prints "ADDR <address>", reads rank 0's address, connects, creates the plane, writes the
//     address of a 64 MiB buffer of 0x5c bytes on its board, syncs, prints "PUBLISHED", then
//     waits for stdin to close (the test kills it while it reads that buffer).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/transport/control_test_handler.h"
#include "transport/grpc/grpc_control_channel.h"
#include "transport/grpc/grpc_control_server.h"
#include "transport/shm/shm_mesh.h"
#include "transport/tcp/tcp_mesh.h"

namespace {

using kolo::transport::GrpcControlChannel;
using kolo::transport::TcpMesh;

// Sends an endless stream from a scratch buffer.
class EndlessSend final : public kolo::StreamExchange {
 public:
  size_t send_total() const override { return size_t{1} << 50; }
  size_t recv_total() const override { return 0; }
  kolo::ConstBytes NextSend() override { return {buffer_.data(), buffer_.size()}; }
  void OnSent(size_t) override {}
  kolo::MutableBytes NextRecv() override { return {}; }
  void OnReceived(size_t) override {}

 private:
  std::vector<char> buffer_ = std::vector<char>(1 << 20, 'x');
};

// Rank 1 of a 2-rank TcpMesh: prints "ADDR <address>", reads rank 0's, connects within
// `connect_seconds`. Null, with the exit code in `*failed`, when a step fails.
std::unique_ptr<TcpMesh> ConnectRankOne(double timeout_seconds, int connect_seconds, int* failed) {
  TcpMesh::Config config;
  config.rank = 1;
  config.size = 2;
  config.auth.credentials = {"fault-test-key", "fault-test"};
  config.timeout_seconds = timeout_seconds;
  auto mesh = TcpMesh::Listen(config);
  *failed = 2;
  if (!mesh.ok()) return nullptr;
  std::cout << "ADDR " << (*mesh)->listen_address() << std::endl;
  std::string peer;
  *failed = 3;
  if (!std::getline(std::cin, peer)) return nullptr;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(connect_seconds);
  *failed = 4;
  if (!(*mesh)->Connect({peer, (*mesh)->listen_address()}, deadline).ok()) return nullptr;
  *failed = 0;
  return std::move(mesh).value();
}

int RunMesh(double timeout_seconds) {
  int failed = 0;
  std::unique_ptr<TcpMesh> mesh = ConnectRankOne(timeout_seconds, 10, &failed);
  if (mesh == nullptr) return failed;
  std::cout << "CONNECTED" << std::endl;
  EndlessSend endless;
  kolo::Status status = mesh->Exchange(0, -1, endless, "endless");
  std::cout << "EXCHANGE " << status.ToString() << std::endl;
  return 0;
}

int RunControl(const std::string& address, int rank) {
  auto channel = GrpcControlChannel::Create(address, 1.5, nullptr);
  kolo::Hello hello{rank, 2, "fault-host", "127.0.0.1:1"};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  if (!channel->Connect(hello, deadline, {}).ok()) return 4;
  std::cout << "WELCOMED" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  kolo::WorkerMessage notice;
  notice.kind = kolo::WorkerMessage::Kind::kShutdown;
  channel->Send(notice).IgnoreError();  // the test checks the controller's side
  channel->Close(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  return 0;
}

int RunController() {
  kolo::transport::testing::RecordingHandler handler(1);
  auto server = kolo::transport::GrpcControlServer::Start("127.0.0.1:0", &handler, 1.5, nullptr);
  if (!server.ok()) return 2;
  handler.set_outbox(server->get());
  std::cout << "PORT " << (*server)->port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  (*server)->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  return 0;
}

int RunShmCreator(int size) {
  TcpMesh::Config config;
  config.rank = 0;
  config.size = size;
  config.auth.credentials = {"fault-test-key", "fault-test"};
  config.timeout_seconds = 30;
  auto mesh = TcpMesh::Listen(config);
  if (!mesh.ok()) return 2;
  std::cout << "ADDR " << (*mesh)->listen_address() << std::endl;
  std::string line;
  if (!std::getline(std::cin, line)) return 3;
  std::vector<std::string> addresses = {(*mesh)->listen_address()};
  std::istringstream others(line);
  for (std::string address; others >> address;) addresses.push_back(address);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  if (!(*mesh)->Connect(addresses, deadline).ok()) return 4;
  std::cout << "CONNECTED" << std::endl;
  kolo::transport::ShmMesh::Config shm;
  shm.rank = 0;
  shm.size = size;
  shm.slot_bytes = 4096;
  shm.timeout_seconds = 30;
  auto plane = kolo::transport::ShmMesh::Create(shm, **mesh);
  std::cout << "SHM " << plane.status().ToString() << std::endl;
  return 0;
}

int RunShmSingleCopy() {
  int failed = 0;
  std::unique_ptr<TcpMesh> mesh = ConnectRankOne(30, 30, &failed);
  if (mesh == nullptr) return failed;
  kolo::transport::ShmMesh::Config shm;
  shm.rank = 1;
  shm.size = 2;
  shm.slot_bytes = 4096;
  shm.timeout_seconds = 30;
  shm.single_copy = kolo::transport::ShmMesh::SingleCopy::kOn;
  auto plane = kolo::transport::ShmMesh::Create(shm, *mesh);
  if (!plane.ok()) {
    std::cout << "SHM " << plane.status().ToString() << std::endl;
    return 5;
  }
  std::vector<uint8_t> buffer(size_t{64} << 20, 0x5c);
  const uint64_t published[2] = {reinterpret_cast<uint64_t>(buffer.data()), buffer.size()};
  std::memcpy((*plane)->board(1), published, sizeof(published));
  if (!(*plane)->Sync("publish").ok()) return 6;
  std::cout << "PUBLISHED" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "mesh") return RunMesh(std::stod(args[1]));
  if (args.size() == 3 && args[0] == "control") return RunControl(args[1], std::stoi(args[2]));
  if (args.size() == 1 && args[0] == "controller") return RunController();
  if (args.size() == 2 && args[0] == "shm-creator") return RunShmCreator(std::stoi(args[1]));
  if (args.size() == 1 && args[0] == "shm-single-copy") return RunShmSingleCopy();
  std::fprintf(stderr,
               "usage: fault_peer mesh <timeout> | control <address> <rank> | controller | "
               "shm-creator <size> | shm-single-copy\n");
  return 1;
}
