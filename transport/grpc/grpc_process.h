// Process-wide settings of the gRPC library under kolo's control plane, made once by the first
// GrpcControlServer or GrpcControlChannel. Thread-safe (std::call_once).
#pragma once

namespace kolo::transport {

// Debian 12's gRPC 1.51 links an Abseil built without NDEBUG, whose absl::Mutex then runs its
// deadlock detector (a global graph of lock order, with stack traces) on every lock that gRPC
// takes: 8% of the controller's CPU at 1,024 ranks (docs/SCALE.md). Release builds of Abseil
// skip it; this makes the system's Abseil do the same. Nothing in kolo uses absl::Mutex, and
// the detector only reports, so no behaviour a program relies on changes.
void SetUpGrpcProcess();

}  // namespace kolo::transport
