// SplitMix64: a tiny deterministic random generator for the digits example. Every rank seeds
// it identically, so initial weights and data order are the same everywhere without any
// communication, and the sequence does not depend on the C++ library's distributions.
#pragma once

#include <cstdint>

namespace kolo::examples {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 24 random bits.
  float NextFloat() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [0, n) for n > 0 (the modulo bias is irrelevant at these sizes).
  uint64_t NextBelow(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

}  // namespace kolo::examples
