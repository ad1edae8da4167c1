// Helpers shared by the fuzz targets: FuzzInput hands out the fuzzer's bytes as small integers
// and byte strings (a minimal FuzzedDataProvider, which g++ builds lack), and KOLO_FUZZ_CHECK
// aborts with a message when an invariant of the code under test fails, so that libFuzzer and
// replay_main both report the input. Single-threaded, like the targets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#define KOLO_FUZZ_CHECK(condition, ...)                                                      \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #condition); \
      std::fprintf(stderr, __VA_ARGS__);                                                     \
      std::fprintf(stderr, "\n");                                                            \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace kolo::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }

  // The next byte, or 0 once the input is used up.
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  // A value in [lo, hi] from the next bytes (as many as the range needs); lo once used up.
  uint64_t Range(uint64_t lo, uint64_t hi) {
    const uint64_t span = hi - lo;
    uint64_t value = 0;
    for (uint64_t seen = 0; seen < span && pos_ < size_; seen = (seen << 8) | 0xff) {
      value = (value << 8) | data_[pos_++];
    }
    return span == UINT64_MAX ? value : lo + value % (span + 1);
  }

  // Up to `max` bytes: fewer if the input runs out.
  std::string Bytes(size_t max) {
    const size_t n = max < remaining() ? max : remaining();
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }

  // Everything left.
  std::string Rest() { return Bytes(remaining()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace kolo::fuzz
