#include "runtime/core_share.h"

#include <sched.h>

#include <algorithm>
#include <fstream>

namespace kolo {
namespace {

constexpr int kMaxCpus = 1 << 16;  // far past any machine; bounds what a peer's text may ask

struct Machine {
  std::string kernel;
  std::vector<bool> cpus;
};

// "" kernel when the text is not "<boot id>/<cpus>".
Machine ParseMachine(const std::string& text) {
  Machine machine;
  const size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0) return machine;
  if (!ParseCpuList(text.substr(slash + 1), &machine.cpus)) return machine;
  machine.kernel = text.substr(0, slash);
  return machine;
}

bool Overlap(const std::vector<bool>& a, const std::vector<bool>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] && b[i]) return true;
  }
  return false;
}

// The number in text[*at...] (digits only), advancing *at; false if none or too large.
bool ReadNumber(const std::string& text, size_t* at, int* value) {
  const size_t begin = *at;
  long n = 0;
  while (*at < text.size() && text[*at] >= '0' && text[*at] <= '9') {
    n = n * 10 + (text[*at] - '0');
    if (n >= kMaxCpus) return false;
    ++*at;
  }
  *value = static_cast<int>(n);
  return *at > begin;
}

}  // namespace

bool ParseCpuList(const std::string& text, std::vector<bool>* cpus) {
  cpus->clear();
  size_t at = 0;
  while (at < text.size()) {
    int first = 0, last = 0;
    if (!ReadNumber(text, &at, &first)) return false;
    last = first;
    if (at < text.size() && text[at] == '-') {
      ++at;
      if (!ReadNumber(text, &at, &last) || last < first) return false;
    }
    if (cpus->size() <= static_cast<size_t>(last)) cpus->resize(static_cast<size_t>(last) + 1);
    for (int cpu = first; cpu <= last; ++cpu) (*cpus)[static_cast<size_t>(cpu)] = true;
    if (at == text.size()) break;
    if (text[at] != ',' || ++at == text.size()) return false;
  }
  return true;
}

std::string FormatCpuList(const std::vector<bool>& cpus) {
  std::string text;
  for (size_t cpu = 0; cpu < cpus.size(); ++cpu) {
    if (!cpus[cpu]) continue;
    size_t last = cpu;
    while (last + 1 < cpus.size() && cpus[last + 1]) ++last;
    if (!text.empty()) text += ',';
    text += std::to_string(cpu);
    if (last > cpu) text += "-" + std::to_string(last);
    cpu = last;
  }
  return text;
}

std::string LocalMachine() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!std::getline(file, boot_id) || boot_id.empty() || boot_id.find('/') != std::string::npos) {
    return "";
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "";
  std::vector<bool> cpus(CPU_SETSIZE, false);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) cpus[static_cast<size_t>(cpu)] = CPU_ISSET(cpu, &set);
  const std::string list = FormatCpuList(cpus);
  return list.empty() ? "" : boot_id + "/" + list;
}

CoreShare ComputeCoreShare(const std::vector<PeerInfo>& peers, int rank, int own_cpus) {
  CoreShare share;
  share.cores = std::max(1, own_cpus);
  if (rank < 0 || rank >= static_cast<int>(peers.size())) return share;
  const PeerInfo& me = peers[static_cast<size_t>(rank)];
  const Machine mine = ParseMachine(me.machine);
  std::vector<bool> together = mine.cpus;
  share.ranks = 0;
  for (const PeerInfo& peer : peers) {
    const Machine theirs = peer.rank == rank ? mine : ParseMachine(peer.machine);
    if (mine.kernel.empty() || theirs.kernel.empty()) {
      share.ranks += peer.host == me.host;  // host names only
      continue;
    }
    if (theirs.kernel != mine.kernel || !Overlap(theirs.cpus, mine.cpus)) continue;
    ++share.ranks;
    if (together.size() < theirs.cpus.size()) together.resize(theirs.cpus.size());
    for (size_t cpu = 0; cpu < theirs.cpus.size(); ++cpu)
      together[cpu] = together[cpu] || theirs.cpus[cpu];
  }
  if (!mine.kernel.empty()) {
    share.cores =
        std::max<int>(1, static_cast<int>(std::count(together.begin(), together.end(), true)));
  }
  share.ranks = std::max(1, share.ranks);
  return share;
}

}  // namespace kolo
