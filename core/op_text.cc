#include "core/op_text.h"

#include <cstdio>

namespace kolo {

std::string DescribeOp(OpType op, const std::vector<TensorEntry*>& entries) {
  std::string text;
  DescribeOp(op, entries, &text);
  return text;
}

void DescribeOp(OpType op, const std::vector<TensorEntry*>& entries, std::string* text) {
  *text = OpTypeName(op);  // short enough to need no allocation of its own
  if (entries.empty()) return;
  // One allocation at most for the common case of one tensor: this runs for every op.
  text->reserve(text->size() + entries[0]->meta.name.size() + 3);
  constexpr size_t kNamed = 2;  // tensors named before "and N more"
  size_t bytes = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    bytes += entries[i]->output.num_bytes();
    if (i < kNamed) {  // appended in place, no temporaries
      *text += i == 0 ? " '" : ", '";
      *text += entries[i]->meta.name;
      *text += '\'';
    }
  }
  if (entries.size() == 1) return;
  if (entries.size() > kNamed) *text += " and " + std::to_string(entries.size() - kNamed) + " more";
  *text += " (" + std::to_string(entries.size()) + " tensors, " + FormatBytes(bytes) + ")";
}

std::string FormatBytes(size_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

}  // namespace kolo
