#include "core/config/slurm_nodelist.h"

#include <cctype>

namespace kolo {
namespace {

constexpr size_t kMaxNames = 1000000;

Status Bad(const std::string& list, const std::string& why) {
  return InvalidArgument("SLURM node list '" + list + "' cannot be read: " + why);
}

bool AllDigits(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "1-4,07,9" -> {"1","2","3","4","07","9"}; a range keeps the width of its lower bound
// ("08-10" -> 08, 09, 10), as SLURM does.
Status ExpandBracket(const std::string& list, const std::string& body,
                     std::vector<std::string>* out) {
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    std::string item = body.substr(start, comma - start);
    size_t dash = item.find('-');
    std::string lo = item.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi) || lo.size() > 9 || hi.size() > 9) {
      return Bad(list, "'[" + body + "]' holds '" + item + "', not a number or a range a-b");
    }
    const long first = std::stol(lo);
    const long last = std::stol(hi);
    if (last < first) return Bad(list, "the range " + item + " runs backwards");
    if (static_cast<size_t>(last - first) + out->size() >= kMaxNames) {
      return Bad(list, "it names more than 1000000 hosts");
    }
    for (long v = first; v <= last; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      out->push_back(digits);
    }
    start = comma + 1;
  }
  return Status::Ok();
}

// Expands one host expression (no top-level commas), bracket group by bracket group.
Status ExpandHost(const std::string& list, const std::string& host, std::vector<std::string>* out) {
  if (host.empty()) return Bad(list, "it has an empty host name");
  std::vector<std::string> names = {""};
  size_t pos = 0;
  while (pos < host.size()) {
    size_t open = host.find('[', pos);
    std::string literal =
        host.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    if (literal.find(']') != std::string::npos) return Bad(list, "a ']' has no '['");
    for (std::string& name : names) name += literal;
    if (open == std::string::npos) break;
    size_t close = host.find(']', open);
    if (close == std::string::npos) return Bad(list, "a '[' is not closed");
    std::vector<std::string> suffixes;
    KOLO_RETURN_IF_ERROR(ExpandBracket(list, host.substr(open + 1, close - open - 1), &suffixes));
    if (names.size() * suffixes.size() >= kMaxNames) {
      return Bad(list, "it names more than 1000000 hosts");
    }
    std::vector<std::string> next;
    next.reserve(names.size() * suffixes.size());
    for (const std::string& name : names) {
      for (const std::string& suffix : suffixes) next.push_back(name + suffix);
    }
    names.swap(next);
    pos = close + 1;
  }
  out->insert(out->end(), names.begin(), names.end());
  return Status::Ok();
}

// Splits at commas outside brackets.
StatusOr<std::vector<std::string>> SplitHosts(const std::string& list) {
  std::vector<std::string> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) return Bad(list, "its brackets do not pair up");
    if (c == ',' && depth == 0) {
      hosts.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return Bad(list, "a '[' is not closed");
  return hosts;
}

}  // namespace

StatusOr<std::vector<std::string>> ExpandSlurmNodeList(const std::string& list) {
  if (list.empty()) return Bad(list, "it is empty");
  KOLO_ASSIGN_OR_RETURN(std::vector<std::string> hosts, SplitHosts(list));
  std::vector<std::string> names;
  for (const std::string& host : hosts) {
    KOLO_RETURN_IF_ERROR(ExpandHost(list, host, &names));
    if (names.size() >= kMaxNames) return Bad(list, "it names more than 1000000 hosts");
  }
  return names;
}

StatusOr<std::string> FirstSlurmNode(const std::string& list) {
  if (list.empty()) return Bad(list, "it is empty");
  KOLO_ASSIGN_OR_RETURN(std::vector<std::string> hosts, SplitHosts(list));
  std::vector<std::string> names;
  KOLO_RETURN_IF_ERROR(ExpandHost(list, hosts.front(), &names));
  return names.front();
}

}  // namespace kolo
