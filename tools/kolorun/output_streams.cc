#include "tools/kolorun/output_streams.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kolo::launcher {

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

OutputStream::~OutputStream() {
  Close();
  if (copy_fd >= 0) close(copy_fd);
}

void OutputStream::Pump() {
  char buffer[64 * 1024];
  ssize_t n = read(fd, buffer, sizeof(buffer));
  if (n > 0) {
    if (copy_fd >= 0) WriteAll(copy_fd, std::string(buffer, static_cast<size_t>(n)));
    WriteAll(sink, splitter.Feed(std::string_view(buffer, static_cast<size_t>(n))));
  } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    Finish();
  }
}

void OutputStream::Finish() {
  if (fd >= 0) WriteAll(sink, splitter.Flush());
  Close();
}

void OutputStream::Close() {
  if (fd >= 0) close(fd);
  fd = -1;
}

Status MakeDirectories(const std::string& dir) {
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return Unavailable("cannot create --output-dir '" + prefix + "': " + std::strerror(errno));
    }
    if (slash == std::string::npos) return Status::Ok();
  }
}

Status CopyStreamTo(const std::string& path, OutputStream* stream) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot create '" + path + "': " + std::strerror(errno));
  stream->copy_fd = fd;
  return Status::Ok();
}

}  // namespace kolo::launcher
