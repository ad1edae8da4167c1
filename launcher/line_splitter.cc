// Line reassembly for kolorun's output forwarding; see line_splitter.h.
#include "launcher/line_splitter.h"

#include <utility>

namespace kolo::launcher {

LineSplitter::LineSplitter(std::string prefix, size_t max_line)
    : prefix_(std::move(prefix)), max_line_(max_line == 0 ? 1 : max_line) {}

void LineSplitter::Emit(std::string_view line, std::string* out) const {
  out->append(prefix_);
  out->append(line);
  out->push_back('\n');
}

std::string LineSplitter::Feed(std::string_view bytes) {
  std::string out;
  while (!bytes.empty()) {
    size_t newline = bytes.find('\n');
    size_t take = newline == std::string_view::npos ? bytes.size() : newline;
    // Never let partial_ exceed max_line_: cut an over-long line into pieces.
    if (partial_.size() + take > max_line_) {
      size_t room = max_line_ - partial_.size();
      partial_.append(bytes.substr(0, room));
      Emit(partial_, &out);
      partial_.clear();
      bytes.remove_prefix(room);
      continue;
    }
    partial_.append(bytes.substr(0, take));
    if (newline == std::string_view::npos) break;
    Emit(partial_, &out);
    partial_.clear();
    bytes.remove_prefix(take + 1);
  }
  return out;
}

std::string LineSplitter::Flush() {
  std::string out;
  if (!partial_.empty()) Emit(partial_, &out);
  partial_.clear();
  return out;
}

}  // namespace kolo::launcher
