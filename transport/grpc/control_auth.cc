#include "transport/grpc/control_auth.h"

namespace kolo::transport {

std::string ControlProof(const JobCredentials& credentials, ControlRole role, const Hello& hello,
                         const std::string& worker_nonce, const std::string& controller_nonce) {
  const char* label =
      role == ControlRole::kController ? "kolo-control-v1/controller" : "kolo-control-v1/worker";
  return Mac(credentials.key, label,
             {credentials.job_id, WordBytes(hello.rank), WordBytes(hello.size), hello.host,
              hello.data_address, worker_nonce, controller_nonce});
}

}  // namespace kolo::transport
