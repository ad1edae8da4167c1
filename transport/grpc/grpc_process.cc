#include "transport/grpc/grpc_process.h"

#include <absl/synchronization/mutex.h>

#include <mutex>

namespace kolo::transport {

void SetUpGrpcProcess() {
  static std::once_flag once;
  std::call_once(once, [] { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); });
}

}  // namespace kolo::transport
