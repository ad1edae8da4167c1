#include "controller/rendezvous.h"

#include <utility>

namespace kolo::controller {

Rendezvous::Rendezvous(int size) : size_(size), admitted_(size, false), peers_(size) {}

Status Rendezvous::Admit(const Hello& hello) {
  const std::string who = "rank " + std::to_string(hello.rank);
  if (hello.rank < 0 || hello.rank >= size_) {
    return InvalidArgument(who + " is out of range for a job of " + std::to_string(size_) +
                           " ranks");
  }
  if (hello.size != size_) {
    return InvalidArgument(who + " says the job has " + std::to_string(hello.size) +
                           " ranks; the controller was started for " + std::to_string(size_));
  }
  if (hello.protocol != kProtocolVersion) {
    const std::string theirs = hello.protocol == 0 ? std::string("a kolo before 0.2")
                                                   : "kolo " + hello.kolo_version + ", protocol " +
                                                         std::to_string(hello.protocol);
    return FailedPrecondition(
        who + " runs " + theirs + "; rank 0 runs kolo " + KOLO_VERSION_STRING + ", protocol " +
        std::to_string(kProtocolVersion) + ": every rank of a job must run the same kolo version");
  }
  if (admitted_[hello.rank]) return InvalidArgument(who + " is already connected");
  admitted_[hello.rank] = true;
  peers_[hello.rank] = PeerInfo{hello.rank, hello.host, hello.data_address, hello.machine};
  ++num_admitted_;
  return Status::Ok();
}

}  // namespace kolo::controller
