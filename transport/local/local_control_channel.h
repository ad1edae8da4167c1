// LocalControlChannel: rank 0's control channel. Rank 0's process hosts the controller, so its
// background thread calls the controller (a ControllerHandler) directly instead of going
// through a gRPC stream to its own process: no serialisation, no stream threads, and no
// thread hand-off on the way in; the controller's answers for rank 0 land in an in-process
// queue. The same object is the controller's ControllerOutbox: it keeps rank 0's messages
// and passes every other rank's to the transport's outbox (the gRPC server).
//
// Threading: Connect, Send, TryReceive and Close are called by the background thread only
// (Send runs the controller's handler on that thread). The outbox side (Send(rank, ...),
// SendToAll) may be called from any thread, including from inside a handler call made by
// Send; it never blocks on anything but this object's own short lock, and calls `wake` and
// the fatal handler under no lock.
#pragma once

#include <deque>
#include <functional>
#include <string>

#include "core/control_channel.h"
#include "core/controller_link.h"
#include "core/mutex.h"

namespace kolo {

class LocalControlChannel final : public ControlChannel, public ControllerOutbox {
 public:
  // `rank`: the rank of this process (the one hosting the controller). `handler` (the
  // controller) and `remote` (where other ranks' messages go) must outlive this object.
  // `generation`: the job generation the transport's Welcome carries to the other ranks (it
  // binds the data mesh's handshakes).
  LocalControlChannel(int rank, ControllerHandler* handler, ControllerOutbox* remote,
                      std::string generation);

  // ControlChannel. Connect hands `hello` to the controller and waits for the Welcome (sent
  // once every rank has said hello) or an Abort, until `deadline`.
  StatusOr<std::vector<PeerInfo>> Connect(const Hello& hello,
                                          std::chrono::steady_clock::time_point deadline,
                                          std::function<void()> wake) override;
  void SetFatalHandler(std::function<void(const Status&)> on_fatal) override;
  Status Send(const WorkerMessage& message) override;
  StatusOr<std::optional<ControllerMessage>> TryReceive() override;
  // Tells the controller that rank 0 left (cleanly if it sent its shutdown notice). Does not
  // wait for anything.
  void Close(std::chrono::steady_clock::time_point deadline) override;
  std::string generation() const override { return generation_; }

  // ControllerOutbox. Rank 0's messages are queued here; the rest go to `remote`.
  void Send(int rank, const ControllerMessage& message) override;
  // The other ranks' copies first, rank 0's last: rank 0 stops the transport once it has
  // read a Shutdown, so by then every other copy is queued.
  void SendToAll(int size, const ControllerMessage& message) override;

 private:
  void Deliver(const ControllerMessage& message);

  const int rank_;
  ControllerHandler* const handler_;
  ControllerOutbox* const remote_;
  const std::string generation_;
  // Background thread only.
  bool connected_ = false;
  bool closed_ = false;
  bool sent_shutdown_ = false;

  Mutex mu_;
  CondVar arrived_;  // with mu_: a message was queued
  std::deque<ControllerMessage> inbox_ KOLO_GUARDED_BY(mu_);
  bool saw_shutdown_ KOLO_GUARDED_BY(mu_) = false;   // no fatal handler after it
  std::function<void()> wake_ KOLO_GUARDED_BY(mu_);  // set by Connect
  std::function<void(const Status&)> on_fatal_ KOLO_GUARDED_BY(mu_);
};

}  // namespace kolo
