// The control stream's admission handshake (docs/SECURITY.md, docs/PROTOCOL.md):
//   worker -> controller:  Hello {rank, size, host, data address, worker nonce}
//   controller -> worker:  Challenge {controller nonce, controller proof}
//   worker -> controller:  AuthProof {worker proof}
// Each proof is an HMAC with the job secret over the job id, the Hello's fields and both
// nonces, under a label of its own, so neither side's proof is valid as the other's and a
// recorded proof is useless on a stream with a fresh controller nonce. Used by
// grpc_control_server.cc and grpc_control_channel.cc. Pure functions; thread-safe.
#pragma once

#include <string>

#include "core/messages.h"
#include "transport/auth/hmac_auth.h"

namespace kolo::transport {

enum class ControlRole { kController, kWorker };

// The proof `role` sends for the stream that opened with `hello`.
std::string ControlProof(const JobCredentials& credentials, ControlRole role, const Hello& hello,
                         const std::string& worker_nonce, const std::string& controller_nonce);

// The security of the control plane, given to the server and to each channel.
struct ControlSecurity {
  JobCredentials credentials;
  // TLS (optional): PEM file paths. The server needs cert and key; a channel verifies the
  // server against ca. All empty: plaintext gRPC.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

}  // namespace kolo::transport
