#include "transport/grpc/grpc_credentials.h"

#include <grpcpp/security/server_credentials.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kolo::transport {
namespace {

// PEM files are small; a bound keeps a wrong path (a device, a huge file) from being slurped.
constexpr std::streamsize kMaxPemBytes = 1 << 20;

StatusOr<std::string> ReadPem(const std::string& path, const char* variable) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument(std::string(variable) + "='" + path +
                           "' cannot be read: " + std::strerror(errno));
  }
  std::string text(static_cast<size_t>(kMaxPemBytes) + 1, '\0');
  in.read(text.data(), kMaxPemBytes + 1);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxPemBytes)) {
    return InvalidArgument(std::string(variable) + "='" + path + "' is larger than 1 MiB");
  }
  if (text.find("-----BEGIN") == std::string::npos) {
    return InvalidArgument(std::string(variable) + "='" + path + "' is not a PEM file");
  }
  return text;
}

}  // namespace

StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ControlSecurity& security) {
  if (security.tls_cert.empty() && security.tls_key.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (security.tls_cert.empty() || security.tls_key.empty()) {
    return InvalidArgument("the controller needs both KOLO_TLS_CERT and KOLO_TLS_KEY for TLS");
  }
  KOLO_ASSIGN_OR_RETURN(std::string cert, ReadPem(security.tls_cert, "KOLO_TLS_CERT"));
  KOLO_ASSIGN_OR_RETURN(std::string key, ReadPem(security.tls_key, "KOLO_TLS_KEY"));
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({key, cert});
  return grpc::SslServerCredentials(options);
}

StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const ControlSecurity& security) {
  if (security.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  KOLO_ASSIGN_OR_RETURN(std::string ca, ReadPem(security.tls_ca, "KOLO_TLS_CA"));
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca;
  return grpc::SslCredentials(options);
}

}  // namespace kolo::transport
