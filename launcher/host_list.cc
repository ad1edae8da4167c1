// Parsing of -H host lists and hostfiles; see host_list.h.
#include "launcher/host_list.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kolo::launcher {
namespace {

// Slots per host are capped so that a typo cannot ask for millions of processes.
constexpr int kMaxSlots = 1 << 16;

bool ParseSlots(const std::string& text, int* slots) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || value < 1 || value > kMaxSlots) return false;
  *slots = static_cast<int>(value);
  return true;
}

// Host names and addresses: no spaces, no shell or list metacharacters, so that they can go
// into an ssh destination and a template without surprises.
bool IsValidHostText(const std::string& text) {
  if (text.empty() || text[0] == '-') return false;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == '@' || c == ':' || c == '[' || c == ']';
    if (!ok) return false;
  }
  return true;
}

// Adds `host`, merging it into an earlier entry of the same name.
Status AddHost(Host host, std::vector<Host>* hosts) {
  for (Host& existing : *hosts) {
    if (existing.name != host.name) continue;
    if (!host.address.empty() && !existing.address.empty() && host.address != existing.address) {
      return InvalidArgument("host '" + host.name +
                             "' is listed twice with different addresses ('" + existing.address +
                             "', '" + host.address + "')");
    }
    if (existing.address.empty()) existing.address = host.address;
    existing.slots += host.slots;
    return Status::Ok();
  }
  hosts->push_back(std::move(host));
  return Status::Ok();
}

StatusOr<Host> ParseHostListEntry(const std::string& entry) {
  Host host;
  std::string rest = entry;
  // Slots follow the last ':' outside brackets (an IPv6 address must be written [addr]).
  size_t colon = rest.rfind(':');
  size_t bracket = rest.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    if (!ParseSlots(rest.substr(colon + 1), &host.slots)) {
      return InvalidArgument("-H entry '" + entry + "': slots must be an integer in [1, " +
                             std::to_string(kMaxSlots) + "], got '" + rest.substr(colon + 1) + "'");
    }
    rest = rest.substr(0, colon);
  }
  size_t eq = rest.find('=');
  host.name = rest.substr(0, eq);
  if (eq != std::string::npos) host.address = rest.substr(eq + 1);
  if (!IsValidHostText(host.name)) {
    return InvalidArgument("-H entry '" + entry + "': '" + host.name + "' is not a host name");
  }
  if (eq != std::string::npos && !IsValidHostText(host.address)) {
    return InvalidArgument("-H entry '" + entry + "': '" + host.address + "' is not an address");
  }
  return host;
}

}  // namespace

StatusOr<std::vector<Host>> ParseHostList(const std::string& text) {
  std::vector<Host> hosts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string entry = text.substr(start, comma - start);
    if (entry.empty()) return InvalidArgument("-H '" + text + "' has an empty host entry");
    KOLO_ASSIGN_OR_RETURN(Host host, ParseHostListEntry(entry));
    KOLO_RETURN_IF_ERROR(AddHost(std::move(host), &hosts));
    start = comma + 1;
  }
  return hosts;
}

StatusOr<std::vector<Host>> ParseHostfile(const std::string& contents, const std::string& file) {
  std::vector<Host> hosts;
  std::istringstream lines(contents);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string where = file + ":" + std::to_string(number) + ": ";
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    Host host;
    if (!(words >> host.name)) continue;  // blank or comment only
    if (!IsValidHostText(host.name)) {
      return InvalidArgument(where + "'" + host.name + "' is not a host name");
    }
    for (std::string word; words >> word;) {
      size_t eq = word.find('=');
      std::string key = word.substr(0, eq);
      std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
      int count = 0;
      if (key == "slots" || key == "count" || key == "max_slots" || key == "max-slots") {
        if (!ParseSlots(value, &count)) {
          return InvalidArgument(where + key + " must be an integer in [1, " +
                                 std::to_string(kMaxSlots) + "], got '" + value + "'");
        }
        // kolorun never oversubscribes, so max_slots only caps slots.
        if (key == "slots" || key == "count") host.slots = count;
      } else if (key == "address") {
        if (!IsValidHostText(value)) {
          return InvalidArgument(where + "'" + value + "' is not an address");
        }
        host.address = value;
      } else {
        return InvalidArgument(where + "unknown keyword '" + word +
                               "' (expected slots=N, max_slots=N or address=A)");
      }
    }
    Status added = AddHost(std::move(host), &hosts);
    if (!added.ok()) return InvalidArgument(where + added.message());
  }
  if (hosts.empty()) return InvalidArgument(file + ": no hosts in the hostfile");
  return hosts;
}

StatusOr<std::vector<Host>> ReadHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return InvalidArgument("cannot read hostfile '" + path + "': " + std::strerror(errno));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return ParseHostfile(contents.str(), path);
}

int TotalSlots(const std::vector<Host>& hosts) {
  int total = 0;
  for (const Host& host : hosts) total += host.slots;
  return total;
}

}  // namespace kolo::launcher
