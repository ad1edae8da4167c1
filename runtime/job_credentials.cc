#include "runtime/job_credentials.h"

#include "core/config/secret_file.h"

namespace kolo {
namespace {

// A secret shorter than this is guessable offline from one recorded handshake.
constexpr size_t kMinKeyBytes = 16;

}  // namespace

StatusOr<transport::JobCredentials> LoadJobCredentials(const Options& options) {
  transport::JobCredentials creds;
  creds.job_id = options.job_id;
  std::string hex = options.secret;
  std::string variable = "KOLO_SECRET";
  if (!options.secret_file.empty()) {
    if (!options.secret.empty()) {
      return InvalidArgument("KOLO_SECRET and KOLO_SECRET_FILE are both set; set one");
    }
    KOLO_ASSIGN_OR_RETURN(std::string text, ReadSecretFile(options.secret_file));
    hex = std::move(text);
    variable = "the secret in KOLO_SECRET_FILE";
  }
  if (hex.empty()) {
    if (!options.secret_file.empty()) return InvalidArgument(variable + " is empty");
    return creds;
  }
  KOLO_ASSIGN_OR_RETURN(std::string key, transport::DecodeHex(hex, variable));
  if (key.size() < kMinKeyBytes) {
    return InvalidArgument(variable + " has " + std::to_string(key.size()) + " bytes; at least " +
                           std::to_string(kMinKeyBytes) + " are needed (kolorun makes 32)");
  }
  creds.key = std::move(key);
  return creds;
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

Status CheckUnauthenticatedJob(const Options& options, const transport::JobCredentials& creds,
                               bool multi_host, const std::string& where) {
  if (!creds.key.empty() || !multi_host || options.insecure) return Status::Ok();
  return FailedPrecondition(
      "this job has no secret (KOLO_SECRET or KOLO_SECRET_FILE) and spans hosts (" + where +
      "): anyone who can reach its ports could join it or feed it data. Start it with kolorun, "
      "which makes a secret, or give every rank the same KOLO_SECRET; KOLO_INSECURE=1 runs it "
      "unauthenticated anyway");
}

}  // namespace kolo
