#include "python/csrc/c10d/op_namer.h"

#include <cstdio>
#include <cstring>
#include <utility>

namespace kolo::torch_ext {

Signature& Signature::Add(int64_t value) {
  uint64_t bits = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) {
    hash_ ^= (bits >> (8 * i)) & 0xffu;
    hash_ *= 1099511628211ull;
  }
  return *this;
}

Signature& Signature::Add(const std::vector<int64_t>& values) {
  Add(static_cast<int64_t>(values.size()));
  for (int64_t v : values) Add(v);
  return *this;
}

Signature& Signature::Add(double value) {
  int64_t bits = 0;
  static_assert(sizeof(bits) == sizeof(value));
  std::memcpy(&bits, &value, sizeof(bits));
  return Add(bits);
}

OpNamer::OpNamer(std::string prefix) : prefix_(std::move(prefix)) {}

std::string OpNamer::Next(uint64_t signature) {
  const size_t counter = previous_ % kCounters;
  undo_ = Undo{previous_, counter};
  const uint32_t slot = uses_[counter]++ % kSlots;
  // 32 bits of the context suffice: names that collide are still equal on every rank, and a
  // name still in flight makes the next op with it wait (KoloBackend), never pair wrongly.
  char name[64];
  std::snprintf(name, sizeof(name), "/%08x.%u",
                static_cast<uint32_t>(previous_ ^ (previous_ >> 32)), slot);
  previous_ = signature;
  ++sequence_;
  return prefix_ + name;
}

void OpNamer::Retract() {
  --uses_[undo_.counter];
  previous_ = undo_.previous;
  --sequence_;
}

}  // namespace kolo::torch_ext
