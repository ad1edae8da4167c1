// RelayUplink: a control relay's one stream to the controller (control_relay.h;
// docs/DESIGN-NOTES.md, "Control relays"). Up: the members' messages are gathered and sent as one
// RelayBatch once every live member has a request batch in it, or the cycle time after the first
// one, or at once for anything else (Hellos, shutdown notices, pings, a member's end), in the order
// they came. Down: each RelayDown goes to `deliver` as it came (its ranks and the encoded message,
// unchanged). Threading: Queue from any thread (the relay server's completion-queue thread);
// Connect and Close from the owner's. Connect starts a reader thread (the handshake, then the
// RelayDowns) and a writer thread (the gathering, its wait bounded by the cycle time); Close joins
// both.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "core/messages.h"
#include "core/mutex.h"
#include "kolo/status.h"
#include "proto/kolo.pb.h"
#include "transport/deadline.h"
#include "transport/grpc/control_auth.h"

namespace kolo::transport {

class RelayUplink {
 public:
  struct Settings {
    std::string controller_address;  // "host:port"
    Hello hello;                     // the relay's: its host rank, the job's size, its host
    double timeout_seconds = 0;      // keepalive, as every control stream's
    double cycle_seconds = 0;        // the longest a request batch waits for the others'
    ControlSecurity security;
    Logger logger;
  };
  using Deliver = std::function<void(const std::vector<int>& ranks, const std::string& message)>;
  // `deliver` runs on the reader thread for each message from the controller; `lost` once,
  // on the reader thread, if the stream ends before Close.
  RelayUplink(Settings settings, Deliver deliver, std::function<void(const Status&)> lost);
  ~RelayUplink();  // Close(now)

  // Opens the stream and answers the controller's challenge; by `deadline` or an error.
  Status Connect(SteadyTime deadline);
  // One member's message or end, in order; a Hello counts the member in, an end out.
  void Queue(wire::RelayItem item) KOLO_EXCLUDES(mu_);
  // Sends what is gathered, half-closes, waits until `deadline` for the controller to end the
  // stream, then cancels it; joins the threads. Idempotent.
  void Close(SteadyTime deadline) KOLO_EXCLUDES(mu_);

 private:
  void ReaderLoop();
  void WriterLoop() KOLO_EXCLUDES(mu_);
  Status AnswerChallenge(const wire::ControllerMessage& first);
  // Whether the gathered batch goes now.
  bool DueLocked(SteadyTime now) const KOLO_REQUIRES(mu_);
  bool Write(const wire::WorkerMessage& message);
  std::string Lost(const std::string& detail) const;

  struct Stream;
  const Settings settings_;
  const Deliver deliver_;
  const std::function<void(const Status&)> lost_;
  std::unique_ptr<Stream> stream_;  // constant from Connect on
  std::thread reader_;
  std::thread writer_;

  Mutex mu_;
  CondVar changed_;                                  // with mu_
  wire::RelayBatch gathered_ KOLO_GUARDED_BY(mu_);   // not yet sent
  std::vector<int> requested_ KOLO_GUARDED_BY(mu_);  // members with a request batch in it
  int live_ KOLO_GUARDED_BY(mu_) = 0;                // members between Hello and end
  bool urgent_ KOLO_GUARDED_BY(mu_) = false;         // it holds more than request batches
  SteadyTime first_at_ KOLO_GUARDED_BY(mu_);         // when its first item came
  Status handshake_ KOLO_GUARDED_BY(mu_) = Unavailable("no answer yet");  // Connect's result
  bool handshake_done_ KOLO_GUARDED_BY(mu_) = false;
  bool closing_ KOLO_GUARDED_BY(mu_) = false;
};

}  // namespace kolo::transport
