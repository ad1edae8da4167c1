#include "tools/scale/controller_host.h"

#include <memory>

#include "controller/controller.h"
#include "core/clock.h"
#include "core/logging.h"
#include "kolo/options.h"
#include "transport/grpc/grpc_control_server.h"

namespace kolo::scale {
namespace {

const char kWhat[] = "the controller process";

// The options a job of `size` ranks runs its controller with: the config table's defaults
// (fusion threshold, cycle time, cache capacity, stall inspector) and the given timeouts.
StatusOr<Options> ControllerOptions(int size, double timeout_seconds) {
  Options options;
  options.rank = 0;
  options.size = size;
  options.controller_address = "127.0.0.1:0";  // where it listens: any free loopback port
  options.timeout_seconds = timeout_seconds;
  options.start_timeout_seconds = timeout_seconds;
  KOLO_RETURN_IF_ERROR(options.Validate());
  return options;
}

}  // namespace

int RunControllerHost(int size, double timeout_seconds,
                      const transport::JobCredentials& credentials, int command_fd, int reply_fd) {
  StatusOr<Options> options = ControllerOptions(size, timeout_seconds);
  if (!options.ok()) {
    (void)WriteLine(reply_fd, "error " + options.status().message(), kWhat);
    return 1;
  }
  Logger logger = MakeLogger(0, "controller", spdlog::level::warn);
  controller::Controller controller(*options, nullptr, SteadyClock::Get(), logger);
  transport::ControlSecurity security;
  security.credentials = credentials;
  StatusOr<std::unique_ptr<transport::GrpcControlServer>> server =
      transport::GrpcControlServer::Start("127.0.0.1:0", &controller, timeout_seconds,
                                          MakeLogger(0, "control-server", spdlog::level::warn),
                                          security, size);
  if (!server.ok()) {
    (void)WriteLine(reply_fd, "error " + server.status().message(), kWhat);
    return 1;
  }
  controller.Attach(server->get());
  controller.Start();
  if (!WriteLine(reply_fd, "port " + std::to_string((*server)->port()), kWhat).ok()) return 1;
  // Commands until "quit" or the ranks process's end of the pipe closes (it died).
  const auto forever = std::chrono::steady_clock::time_point::max();
  for (;;) {
    StatusOr<std::string> command = ReadLine(command_fd, forever, "the ranks process");
    if (!command.ok() || *command == "quit") break;
    if (*command == "sample" && !WriteLine(reply_fd, SampleText(SampleSelf()), kWhat).ok()) break;
  }
  (*server)->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  controller.Stop();
  return controller.aborted() ? 1 : 0;
}

StatusOr<int> ControllerProbe::Port() {
  KOLO_ASSIGN_OR_RETURN(const std::string line,
                        ReadLine(reply_fd_, std::chrono::steady_clock::now() + timeout_, kWhat));
  if (line.rfind("port ", 0) != 0) return Unavailable(std::string(kWhat) + ": " + line);
  return std::stoi(line.substr(5));
}

StatusOr<ProcessSample> ControllerProbe::Sample() {
  KOLO_RETURN_IF_ERROR(WriteLine(command_fd_, "sample", kWhat));
  KOLO_ASSIGN_OR_RETURN(const std::string line,
                        ReadLine(reply_fd_, std::chrono::steady_clock::now() + timeout_, kWhat));
  return ParseSample(line);
}

Status ControllerProbe::Quit() {
  return WriteLine(command_fd_, "quit", kWhat);
}

}  // namespace kolo::scale
