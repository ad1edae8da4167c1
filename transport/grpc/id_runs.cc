#include "transport/grpc/id_runs.h"

#include <string>

namespace kolo::transport {

size_t IdRunLength(const uint32_t* ids, size_t count) {
  size_t n = count == 0 ? 0 : 1;
  while (n < count && ids[n] > ids[n - 1] && ids[n] - ids[n - 1] <= kMaxIdRunGap) ++n;
  return n;
}

void EncodeIdRun(const uint32_t* ids, size_t count, wire::IdRun* run) {
  const uint32_t first = ids[0];
  std::string bits(static_cast<size_t>(ids[count - 1] - first) / 8 + 1, '\0');
  for (size_t i = 0; i < count; ++i) {
    const uint32_t offset = ids[i] - first;
    bits[offset / 8] =
        static_cast<char>(static_cast<unsigned char>(bits[offset / 8]) | (1u << (offset % 8)));
  }
  run->set_first(first);
  run->set_bits(std::move(bits));
}

Status AppendIdRun(const wire::IdRun& run, size_t* budget, std::vector<uint32_t>* ids) {
  const std::string& bits = run.bits();
  if (bits.empty() || (static_cast<unsigned char>(bits[0]) & 1u) == 0 || run.first() == 0) {
    return InvalidArgument("a cache id run does not start with a non-zero id");
  }
  for (size_t byte = 0; byte < bits.size(); ++byte) {
    const unsigned value = static_cast<unsigned char>(bits[byte]);
    if (value == 0) continue;
    for (unsigned bit = 0; bit < 8; ++bit) {
      if ((value & (1u << bit)) == 0) continue;
      const uint64_t id = uint64_t{run.first()} + byte * 8 + bit;
      if (id > UINT32_MAX) return InvalidArgument("a cache id run goes past 2^32 - 1");
      if (*budget == 0) {
        return InvalidArgument("a message names more than " + std::to_string(kMaxIdsInRuns) +
                               " cache ids");
      }
      --*budget;
      ids->push_back(static_cast<uint32_t>(id));
    }
  }
  return Status::Ok();
}

}  // namespace kolo::transport
