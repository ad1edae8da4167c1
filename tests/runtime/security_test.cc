// Security of a whole job through the public API (docs/SECURITY.md): a rank with the wrong
// secret fails init() with a clear reason; a running job's allreduces keep working while bogus
// clients hit its controller port; jobs without a secret are refused off loopback; secret
// files must be private; KOLO_SECRET leaves the environment; TLS works and a wrong CA fails.
// Real runtimes as threads over real gRPC and sockets on 127.0.0.1.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/support/local_job.h"
#include "tests/support/seconds_since.h"
#include "tests/support/temp_dir.h"
#include "tests/support/watchdog.h"
#include "transport/grpc/grpc_control_channel.h"

using namespace kolo;
using kolo::testing::LocalJob;
using kolo::testing::PickFreePort;
using kolo::testing::Watchdog;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

using kolo::testing::SecondsSince;

Options RankOptions(int rank, int size, int port) {
  Options options;
  options.rank = rank;
  options.size = size;
  options.controller_address = "127.0.0.1:" + std::to_string(port);
  options.secret = kSecret;
  options.job_id = "security-test";
  options.timeout_seconds = 5;
  options.start_timeout_seconds = 5;
  options.log_level = "off";
  return options;
}

// Creates one runtime per options on its own thread; returns each one's status.
std::vector<Status> CreateAll(const std::vector<Options>& all,
                              std::vector<std::unique_ptr<Runtime>>* runtimes = nullptr) {
  std::vector<Status> statuses(all.size());
  std::vector<std::unique_ptr<Runtime>> created(all.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < all.size(); ++i) {
    threads.emplace_back([&, i] {
      StatusOr<std::unique_ptr<Runtime>> rt = Runtime::Create(all[i]);
      statuses[i] = rt.status();
      if (rt.ok()) created[i] = std::move(rt).value();
    });
  }
  for (auto& t : threads) t.join();
  if (runtimes != nullptr) *runtimes = std::move(created);
  return statuses;
}

std::string AllreduceRounds(Runtime& rt, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    float data[16];
    for (float& x : data) x = 1;
    TensorView view{data, DataType::kFloat32, {16}, Device::Cpu()};
    Status s = rt.Allreduce("grad/" + std::to_string(i % 4), view, view);
    if (!s.ok()) return s.ToString();
    if (data[7] != static_cast<float>(rt.size())) return "wrong sum in round " + std::to_string(i);
  }
  return "";
}

using kolo::testing::TempDir;

}  // namespace

TEST_CASE("A rank with the wrong secret fails init naming the reason, not the secret",
          "[runtime][security]") {
  Watchdog watchdog("wrong secret", 60s);
  const int port = PickFreePort();
  std::vector<Options> options = {RankOptions(0, 2, port), RankOptions(1, 2, port)};
  options[1].secret = std::string(64, 'e');
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> statuses = CreateAll(options);
  CHECK(statuses[1].code() == StatusCode::kAborted);
  CHECK_THAT(
      statuses[1].message(),
      Catch::StartsWith("init() of rank 1 of 2: the controller at 127.0.0.1:" +
                        std::to_string(port) + " could not prove that it holds this job's secret"));
  CHECK(statuses[1].message().find("eeee") == std::string::npos);
  // Rank 1 never joined: the controller gives up at the start timeout, naming it.
  CHECK(statuses[0].code() == StatusCode::kAborted);
  CHECK_THAT(statuses[0].message(),
             Catch::Contains("rank 1 never connected to the controller within 5 s"));
  CHECK(SecondsSince(start) < 2 * 5 + 5);  // the 5 s start timeout, generous margin
}

TEST_CASE("A running job completes its allreduces while bogus clients hit its controller",
          "[runtime][security]") {
  Watchdog watchdog("running job under attack", 120s);
  std::mutex mu;
  std::string controller;  // guarded by mu while the ranks start
  LocalJob job(3, [&](Options& options) {
    options.job_id = "attacked";
    std::lock_guard<std::mutex> lock(mu);
    controller = options.controller_address;
  });
  std::atomic<bool> done{false};
  std::vector<std::string> failures;
  std::thread training([&] {
    failures = job.RunOnAllRanks([](Runtime& rt) { return AllreduceRounds(rt, 200); });
    done = true;
  });
  int attacks = 0;
  while (!done || attacks < 3) {
    // A worker with another secret claims rank 1, whose real stream is open.
    transport::ControlSecurity wrong;
    wrong.credentials = {"another-secret-0123456789", "attacked"};
    auto channel = transport::GrpcControlChannel::Create(controller, 5, nullptr, wrong);
    auto refused = channel->Connect({1, 3, "intruder", "127.0.0.1:1"},
                                    std::chrono::steady_clock::now() + 10s, {});
    CHECK(refused.status().code() == StatusCode::kAborted);
    CHECK_THAT(refused.status().message(), Catch::Contains("could not prove"));
    // Garbage bytes on the controller's port.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port =
        htons(static_cast<uint16_t>(std::stoi(controller.substr(controller.rfind(':') + 1))));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      const std::string junk = "\x16\x03\x01 garbage that is neither HTTP/2 nor kolo";
      send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    }
    close(fd);
    ++attacks;
  }
  training.join();
  CHECK(failures == std::vector<std::string>{});
  CHECK(attacks >= 3);
  // And the job still works afterwards.
  CHECK(job.RunOnAllRanks([](Runtime& rt) { return AllreduceRounds(rt, 3); }) ==
        std::vector<std::string>{});
}

TEST_CASE("Without a secret a job off loopback is refused unless KOLO_INSECURE",
          "[runtime][security]") {
  Watchdog watchdog("insecure", 30s);
  Options options = RankOptions(1, 2, 1);
  options.secret.clear();
  options.controller_address = "192.0.2.1:29500";  // TEST-NET: never reachable
  options.start_timeout_seconds = 0.5;
  StatusOr<std::unique_ptr<Runtime>> refused = Runtime::Create(options);
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(refused.status().message(),
             Catch::Contains("this job has no secret (KOLO_SECRET or KOLO_SECRET_FILE) and spans "
                             "hosts (the controller address 192.0.2.1:29500 is not a loopback "
                             "address)"));
  CHECK_THAT(refused.status().message(), Catch::Contains("KOLO_INSECURE=1"));
  options.insecure = true;
  StatusOr<std::unique_ptr<Runtime>> allowed = Runtime::Create(options);
  CHECK(allowed.status().code() != StatusCode::kFailedPrecondition);  // it tried to connect
}

TEST_CASE("A single-host job without a secret still runs", "[runtime][security]") {
  Watchdog watchdog("no secret", 60s);
  LocalJob job(2, [](Options& options) { options.secret.clear(); });
  CHECK(job.RunOnAllRanks([](Runtime& rt) { return AllreduceRounds(rt, 2); }) ==
        std::vector<std::string>{});
}

TEST_CASE("The secret can come from a private file, and a readable one is refused",
          "[runtime][security]") {
  Watchdog watchdog("secret file", 60s);
  TempDir dir("kolo-security-");
  const std::string path = dir.path() + "/secret";
  std::ofstream(path) << kSecret << "\n";
  REQUIRE(chmod(path.c_str(), 0644) == 0);
  Options options = RankOptions(0, 1, 0);
  options.controller_address.clear();
  options.secret.clear();
  options.secret_file = path;
  StatusOr<std::unique_ptr<Runtime>> refused = Runtime::Create(options);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(),
             Catch::Contains("KOLO_SECRET_FILE='" + path +
                             "' has mode 0644: group or others may access it; make it 0600"));
  options.secret_file = dir.path() + "/missing";  // a user's mistake, not an internal error
  refused = Runtime::Create(options);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::Contains("/missing' cannot be opened: "));
  options.secret_file = path;
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  LocalJob job(2, [&](Options& o) {
    o.secret.clear();
    o.secret_file = path;
  });
  CHECK(job.RunOnAllRanks([](Runtime& rt) { return AllreduceRounds(rt, 2); }) ==
        std::vector<std::string>{});
}

TEST_CASE("KOLO_SECRET leaves the environment once read, and is remembered",
          "[runtime][security]") {
  REQUIRE(setenv("KOLO_SECRET", kSecret.c_str(), 1) == 0);
  StatusOr<Options> first = Options::FromEnvironment();
  CHECK(std::getenv("KOLO_SECRET") == nullptr);
  REQUIRE(first.ok());
  CHECK(first->secret == kSecret);
  StatusOr<Options> again = Options::FromEnvironment();  // init() after shutdown()
  REQUIRE(again.ok());
  CHECK(again->secret == kSecret);
  REQUIRE(setenv("KOLO_SECRET", "not-hex-and-secret", 1) == 0);
  StatusOr<Options> bad = Options::FromEnvironment();
  CHECK(bad.status().message().find("not-hex") == std::string::npos);
  CHECK_THAT(bad.status().message(), Catch::Contains("KOLO_SECRET is invalid (value not shown)"));
}

namespace {

// Makes a self-signed CA-capable certificate for 127.0.0.1 in `dir` (name.crt, name.key).
bool MakeCertificate(const std::string& dir, const std::string& name) {
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=kolo-test -addext "
      "subjectAltName=IP:127.0.0.1 -keyout '" +
      dir + "/" + name + ".key' -out '" + dir + "/" + name + ".crt' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

}  // namespace

TEST_CASE("TLS on the control plane: the job runs, and a worker with the wrong CA fails clearly",
          "[runtime][security][tls]") {
  Watchdog watchdog("tls", 90s);
  if (std::system("openssl version >/dev/null 2>&1") != 0) {
    WARN("SKIPPED: the openssl command-line tool is missing; TLS is not tested");
    return;
  }
  TempDir dir("kolo-security-");
  REQUIRE(MakeCertificate(dir.path(), "server"));
  REQUIRE(MakeCertificate(dir.path(), "other"));
  const std::string cert = dir.path() + "/server.crt";
  const std::string key = dir.path() + "/server.key";
  {
    LocalJob job(2, [&](Options& o) {
      o.tls_cert = cert;
      o.tls_key = key;
      o.tls_ca = cert;
    });
    CHECK(job.RunOnAllRanks([](Runtime& rt) { return AllreduceRounds(rt, 3); }) ==
          std::vector<std::string>{});
  }
  const int port = PickFreePort();
  std::vector<Options> options = {RankOptions(0, 2, port), RankOptions(1, 2, port)};
  for (Options& o : options) {
    o.tls_cert = cert;
    o.tls_key = key;
    o.tls_ca = cert;
    o.start_timeout_seconds = 3;
  }
  options[1].tls_ca = dir.path() + "/other.crt";
  std::vector<Status> statuses = CreateAll(options);
  CHECK(statuses[1].code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(statuses[1].message(), Catch::Contains("could not reach the controller"));
  CHECK_THAT(statuses[1].message(), Catch::Contains("TLS"));
  CHECK_THAT(statuses[1].message(), Catch::Contains("KOLO_TLS_CA"));
}

namespace {

// Local addresses (hex, as /proc/net/tcp and tcp6 write them) of the listening sockets on
// `port`. gRPC may listen on an IPv6 socket with a v4-mapped address.
std::vector<std::string> ListeningAddresses(int port) {
  std::vector<std::string> found;
  char wanted[8];
  std::snprintf(wanted, sizeof(wanted), "%04X", port);
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream table(path);
    std::string line;
    while (std::getline(table, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.find(':');
      if (colon == std::string::npos || state != "0A") continue;  // 0A: LISTEN
      if (local.substr(colon + 1) == wanted) found.push_back(local.substr(0, colon));
    }
  }
  return found;
}

}  // namespace

TEST_CASE("A single-host job's controller listens on loopback only", "[runtime][security]") {
  Watchdog watchdog("loopback bind", 60s);
  std::mutex mu;
  std::string controller;  // guarded by mu while the ranks start
  LocalJob job(2, [&](Options& options) {
    std::lock_guard<std::mutex> lock(mu);
    controller = options.controller_address;
  });
  const int port = std::stoi(controller.substr(controller.rfind(':') + 1));
  std::vector<std::string> addresses = ListeningAddresses(port);
  REQUIRE_FALSE(addresses.empty());
  for (const std::string& address : addresses) {
    // 127.0.0.1, as IPv4 or v4-mapped IPv6; never the wildcard.
    CHECK((address == "0100007F" || address == "0000000000000000FFFF00000100007F"));
  }
}
