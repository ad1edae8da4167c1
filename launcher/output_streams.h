// OutputStream: one pipe of a process kolorun started (a rank's or an elastic worker's stdout
// or stderr), forwarded line by line with a prefix to kolorun's own stdout or stderr and, with
// --output-dir, copied raw into a file. Used by the supervisor and the elastic driver, on
// kolorun's single thread.
#pragma once

#include <string>

#include "kolo/status.h"
#include "launcher/line_splitter.h"

namespace kolo::launcher {

// How rank output is presented beyond the prefix, from horovodrun's options. Set once by
// kolorun's main() before any rank starts; read by every OutputStream and CopyStreamTo.
struct OutputStyle {
  // --prefix-output-with-timestamp: each forwarded line starts with the local time as
  // asctime(3) writes it, before the prefix, as horovodrun's lines do.
  bool timestamps = false;
  // --output-filename: > 0: CopyStreamTo writes DIR/rank.N.out (.err) to horovodrun's layout,
  // DIR/rank.N/stdout (stderr) with N zero-padded to this many digits (and DIR/worker.W.out to
  // DIR/worker.W/stdout).
  int horovod_layout_digits = 0;
};
void SetOutputStyle(const OutputStyle& style);

// The file CopyStreamTo writes for `path` under the current OutputStyle.
std::string StyledCopyPath(const std::string& path);

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

// Opens StyledCopyPath(`path`) for the raw copy of a stream (created, truncated; its folder
// made) and gives it to `stream`.
Status CopyStreamTo(const std::string& path, OutputStream* stream);

}  // namespace kolo::launcher
