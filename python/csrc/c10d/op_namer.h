// OpNamer: the kolo names of one torch.distributed process group's collectives. torch issues
// them unnamed, in the same order on every rank of the group; kolo pairs ops across ranks by
// name (docs/TORCH-DISTRIBUTED.md, "Naming c10d's collectives"). A collective's name depends
// only on the collectives before it in the group, so the i-th collective has the same name on
// every rank whose earlier collectives matched, and a rank that calls a different op, shape or
// dtype meets the others under one name and gets kolo's mismatch error instead of a hang. The
// name is the previous collective's signature (its context) and a slot that counts the uses of
// that context modulo kSlots, so a training loop reuses a few names per collective and its
// allreduces stay in kolo's response cache (the fast path), while up to kSlots collectives of
// one context may be in flight at once.
//
// Threading: none; the owner (KoloBackend) calls it under its issue lock. No torch types, so that
// it is unit-tested without torch (tests/python/c10d/op_namer_test.cc).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kolo::torch_ext {

// What identifies a collective for its successor's name: a 64-bit FNV-1a hash of the fields
// added, in order. Equal fields give equal signatures on every rank and build.
class Signature {
 public:
  Signature& Add(int64_t value);
  Signature& Add(const std::vector<int64_t>& values);
  Signature& Add(double value);
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

class OpNamer {
 public:
  // How many names one context cycles through: collectives of one context that may be in
  // flight together before the next waits for the oldest (KoloBackend does), and the number of
  // repetitions after which a training loop's collectives are all cached.
  static constexpr uint32_t kSlots = 4;

  // `prefix` starts every name, e.g. "c10d.0" for the default group.
  explicit OpNamer(std::string prefix);

  // The name of the next collective, whose own signature is `signature` (the context of the
  // collective after it). Advances the sequence.
  std::string Next(uint64_t signature);
  // Takes back the last Next(): that collective was refused before kolo took it, on this rank
  // only, so it does not count (the next collective gets the same name). Once per Next().
  void Retract();

  // Collectives named so far (torch's sequence number of the group).
  uint64_t sequence() const { return sequence_; }

 private:
  struct Undo {
    uint64_t previous = 0;
    size_t counter = 0;
  };
  static constexpr size_t kCounters = 1024;

  const std::string prefix_;
  uint64_t sequence_ = 0;
  uint64_t previous_ = 0;  // signature of the last collective named; 0 before the first
  // Uses of each context, indexed by its signature modulo kCounters. Contexts that share a
  // counter share it on every rank alike, so names stay equal across ranks.
  std::array<uint32_t, kCounters> uses_{};
  Undo undo_;
};

}  // namespace kolo::torch_ext
