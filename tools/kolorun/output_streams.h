// OutputStream: one pipe of a process kolorun started (a rank's or an elastic worker's stdout
// or stderr), forwarded line by line with a prefix to kolorun's own stdout or stderr and, with
// --output-dir, copied raw into a file. Used by the supervisor and the elastic driver, on
// kolorun's single thread.
#pragma once

#include <string>

#include "kolo/status.h"
#include "tools/kolorun/line_splitter.h"

namespace kolo::launcher {

// Writes all of `data`, retrying short writes; drops it if the reader has gone away.
void WriteAll(int fd, const std::string& data);

struct OutputStream {
  OutputStream(int fd, int sink, const std::string& prefix)
      : fd(fd), sink(sink), splitter(prefix) {}
  ~OutputStream();
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;

  // Reads what the pipe has and forwards its complete lines; at end of file (or an error)
  // forwards the rest and closes the pipe.
  void Pump();
  // Forwards what is left without a newline and closes the pipe.
  void Finish();
  void Close();
  bool open() const { return fd >= 0; }

  int fd;            // -1 once closed
  int sink;          // kolorun's stdout or stderr
  int copy_fd = -1;  // the process's file in --output-dir, or -1
  LineSplitter splitter;
};

// Creates `dir` and its missing parents ("--output-dir" in errors).
Status MakeDirectories(const std::string& dir);

// Opens `path` for the raw copy of a stream (created, truncated) and gives it to `stream`.
Status CopyStreamTo(const std::string& path, OutputStream* stream);

}  // namespace kolo::launcher
