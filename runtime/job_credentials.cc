#include "runtime/job_credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/errno_status.h"

namespace kolo {
namespace {

// 32 bytes of hex is 64 digits; a file much larger than that is not a secret file.
constexpr size_t kMaxSecretFileBytes = 4096;
// A secret shorter than this is guessable offline from one recorded handshake.
constexpr size_t kMinKeyBytes = 16;

StatusOr<std::string> ReadSecretFile(const std::string& path) {
  const std::string what = "KOLO_SECRET_FILE='" + path + "'";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoToStatus(errno, what + " cannot be opened");
  struct stat info {};
  std::string text;
  Status status;
  if (fstat(fd, &info) != 0) {
    status = ErrnoToStatus(errno, what + ": fstat()");
  } else if (!S_ISREG(info.st_mode)) {
    status = InvalidArgument(what + " is not a regular file");
  } else if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    status = InvalidArgument(what + " has mode " + mode +
                             ": group or others may access it; make it 0600 (chmod 600)");
  } else if (info.st_uid != geteuid()) {
    status = InvalidArgument(what + " belongs to another user");
  } else {
    text.resize(kMaxSecretFileBytes + 1);
    const ssize_t n = read(fd, text.data(), text.size());
    if (n < 0) {
      status = ErrnoToStatus(errno, what + ": read()");
    } else if (static_cast<size_t>(n) > kMaxSecretFileBytes) {
      status = InvalidArgument(what + " is larger than " + std::to_string(kMaxSecretFileBytes) +
                               " bytes; it should hold only the hex secret");
    }
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  if (!status.ok()) return status;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

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
