// kolo's own ways into a Runtime (not an API): its RuntimeImpl and point-to-point lane, and the
// default runtime that
// kolo::init() made, for the parts of the API that live outside runtime.cc and
// default_runtime.cc (point_to_point.cc, the raw data plane of runtime/raw_data_plane.h).
// Threading: as the Runtime's; CurrentDefaultRuntime from any thread.
#pragma once

#include <memory>

#include "kolo/kolo.h"
#include "kolo/status.h"
#include "runtime/runtime_impl.h"

namespace kolo {

namespace internal {

class RuntimeAccess {
 public:
  static RuntimeImpl& Impl(Runtime& rt) { return *rt.impl_; }
  // The point-to-point lane (kolo/p2p.h), or null where KOLO_P2P made no connections. It
  // outlives the runtime's teardown (refusing posts once stopped). Any thread.
  static transport::P2pLane* P2pLane(const RuntimeImpl& impl) { return impl.planes_.p2p(); }
};

// The default runtime (null when kolo::init() has not made one, or after shutdown()), kept alive
// by the pointer; and the error an op on it gets then.
std::shared_ptr<Runtime> CurrentDefaultRuntime();
Status DefaultRuntimeMissing();

}  // namespace internal
}  // namespace kolo
