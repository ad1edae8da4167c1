#include "launcher/output_streams.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace kolo::launcher {
namespace {

OutputStyle& Style() {
  static OutputStyle style;  // main thread only (see SetOutputStyle)
  return style;
}

// `lines` (whole lines, each ending in '\n') each after the time, with --prefix-output-with-
// timestamp; else unchanged.
std::string Stamped(const std::string& lines) {
  if (!Style().timestamps || lines.empty()) return lines;
  const time_t now = time(nullptr);
  struct tm local {};
  localtime_r(&now, &local);
  char stamp[64] = {0};
  strftime(stamp, sizeof(stamp), "%a %b %e %H:%M:%S %Y", &local);  // asctime's layout
  std::string out;
  for (size_t start = 0; start < lines.size();) {
    size_t end = lines.find('\n', start);
    end = end == std::string::npos ? lines.size() : end + 1;
    out.append(stamp).append(lines, start, end - start);
    start = end;
  }
  return out;
}

}  // namespace

void SetOutputStyle(const OutputStyle& style) {
  Style() = style;
}

std::string StyledCopyPath(const std::string& path) {
  const int digits = Style().horovod_layout_digits;
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (digits <= 0 || dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return path;
  }
  const std::string extension = path.substr(dot);
  if (extension != ".out" && extension != ".err") return path;
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string stem = path.substr(dir.size(), dot - dir.size());
  const std::string number = stem.compare(0, 5, "rank.") == 0 ? stem.substr(5) : "";
  if (!number.empty() && number.find_first_not_of("0123456789") == std::string::npos &&
      number.size() < static_cast<size_t>(digits)) {
    stem = "rank." + std::string(static_cast<size_t>(digits) - number.size(), '0') + number;
  }
  return dir + stem + (extension == ".out" ? "/stdout" : "/stderr");
}

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
    WriteAll(sink, Stamped(splitter.Feed(std::string_view(buffer, static_cast<size_t>(n)))));
  } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    Finish();
  }
}

void OutputStream::Finish() {
  if (fd >= 0) WriteAll(sink, Stamped(splitter.Flush()));
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

Status CopyStreamTo(const std::string& requested, OutputStream* stream) {
  const std::string path = StyledCopyPath(requested);
  if (path != requested) {
    const std::string dir = path.substr(0, path.rfind('/'));
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Unavailable("cannot create '" + dir + "': " + std::strerror(errno));
    }
  }
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot create '" + path + "': " + std::strerror(errno));
  stream->copy_fd = fd;
  return Status::Ok();
}

}  // namespace kolo::launcher
