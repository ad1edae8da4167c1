#include "core/config/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "core/errno_status.h"

namespace kolo {
namespace {

// 32 bytes of hex is 64 digits; a file much larger than that is not a secret file.
constexpr size_t kMaxSecretFileBytes = 4096;

}  // namespace

StatusOr<std::string> ReadSecretFile(const std::string& path) {
  const std::string what = "KOLO_SECRET_FILE='" + path + "'";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return InvalidArgument(what + " cannot be opened: " + ErrnoText(errno));
  struct stat info {};
  std::string text;
  Status status;
  if (fstat(fd, &info) != 0) {
    status = InvalidArgument(what + ": fstat(): " + ErrnoText(errno));
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
      status = InvalidArgument(what + ": read(): " + ErrnoText(errno));
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

}  // namespace kolo
