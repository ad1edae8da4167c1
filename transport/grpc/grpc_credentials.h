// gRPC credentials for the control plane: plaintext, or TLS from the PEM files of
// KOLO_TLS_CERT / KOLO_TLS_KEY / KOLO_TLS_CA (docs/SECURITY.md). Internal to transport/grpc/.
// Pure functions over the file system; thread-safe.
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "kolo/status.h"
#include "transport/grpc/control_auth.h"

namespace kolo::transport {

// TLS with tls_cert and tls_key when both are set (tls_ca, if set, is sent as the trust chain
// root but clients are not asked for certificates); plaintext when neither is. One without the
// other, or a file that cannot be read, is an error naming the variable.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ControlSecurity& security);

// TLS verifying the controller against tls_ca when it is set; plaintext otherwise.
StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ControlSecurity& security);

}  // namespace kolo::transport
