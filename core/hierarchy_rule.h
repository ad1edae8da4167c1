// The hierarchical choice as a number (KOLO_HIERARCHICAL, docs/SCALE.md "Hierarchical
// collectives"): an allreduce runs hierarchically when its bytes (the fused total, the same on
// every rank) reach a minimum; 0 means every allreduce, kHierarchyFlat none. The executor
// applies it (ops/cpu_executor.h); the fast path's rounds and the controller's responses carry
// it, so that KOLO_AUTOTUNE can change it while every rank still decides the same per op
// (core/autotuner.h).
//
// Constants and a pure function; no threading concerns.
#pragma once

#include <cstdint>

#include "kolo/options.h"

namespace kolo {

// Never hierarchical: every allreduce runs flat. Also "no limit" in the rounds' rule, where
// every rank takes the smallest minimum any rank sent.
constexpr uint64_t kHierarchyFlat = UINT64_MAX;

// KOLO_HIERARCHICAL=auto runs allreduces of at least this many bytes hierarchically (smaller
// ones flat, where the two extra steps within the host cost more than the bytes they save
// between hosts). Provisional: chosen before it was measured on a multi-host testbed.
constexpr uint64_t kHierarchicalAutoMinBytes = uint64_t{64} << 10;

// What KOLO_HIERARCHICAL asks for: on 0, auto kHierarchicalAutoMinBytes, off kHierarchyFlat.
inline uint64_t ConfiguredHierarchyMinBytes(Hierarchical mode) {
  switch (mode) {
    case Hierarchical::kOn:
      return 0;
    case Hierarchical::kOff:
      return kHierarchyFlat;
    case Hierarchical::kAuto:
      break;
  }
  return kHierarchicalAutoMinBytes;
}

}  // namespace kolo
