// The controller process of kolo-scale: rank 0's real Controller behind the real
// GrpcControlServer on a loopback port, as runtime/runtime_start.cc starts them, but with no
// rank of its own (every simulated rank, rank 0 included, joins over gRPC), so that this
// process holds the controller and nothing else and its CPU time and memory are the control
// plane's. Driven over two pipes by the ranks process (ControllerProbe):
//   host -> probe: "port P" once listening ("error TEXT" if it cannot start)
//   probe -> host: "sample"  host -> probe: "cpu_ns rss_kb threads" (process_sample.h)
//   probe -> host: "quit", or the pipe's end: the host stops the server and returns.
// Threading: RunControllerHost blocks its caller (the child's only thread of its own) for the
// whole run; ControllerProbe is used by one thread.
#pragma once

#include <chrono>
#include <string>

#include "kolo/status.h"
#include "tools/scale/process_sample.h"
#include "transport/auth/hmac_auth.h"

namespace kolo::scale {

// Serves a job of `size` ranks until told to quit; returns the process's exit code.
// `timeout_seconds` is the job's KOLO_TIMEOUT_SECONDS and start timeout.
int RunControllerHost(int size, double timeout_seconds,
                      const transport::JobCredentials& credentials, int command_fd, int reply_fd);

class ControllerProbe {
 public:
  // The ranks process's ends of the two pipes; `timeout` bounds every answer.
  ControllerProbe(int command_fd, int reply_fd, std::chrono::steady_clock::duration timeout)
      : command_fd_(command_fd), reply_fd_(reply_fd), timeout_(timeout) {}

  // Waits for the host's port.
  StatusOr<int> Port();
  // The controller process's CPU time, RSS and threads, now.
  StatusOr<ProcessSample> Sample();
  // Tells the host to stop the server and exit.
  Status Quit();

 private:
  const int command_fd_;
  const int reply_fd_;
  const std::chrono::steady_clock::duration timeout_;
};

}  // namespace kolo::scale
