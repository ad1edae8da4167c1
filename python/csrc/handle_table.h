// The ops kolo.torch has in flight: each a kolo::Handle plus the tensors it reads and writes,
// kept alive here until Python synchronizes it (Horovod's integer handles).
//
// Threading: every HandleTable method may be called from any thread; one mutex guards the map.
// A PendingOp's `allocated` and `received_splits` are written by kolo's background thread (the
// allocators, before the op's completion) and read only after its handle completed.
#pragma once

#include <torch/extension.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kolo/kolo.h"

namespace kolo::torch_ext {

struct PendingOp {
  Handle handle;
  // Inputs and outputs the op reads or writes: alive until it completed.
  std::vector<at::Tensor> keep_alive;
  // Outputs known at enqueue (allreduce, broadcast, reducescatter), in member order.
  std::vector<at::Tensor> outputs;
  // Outputs made by an allocator on kolo's thread (allgather, alltoall), in member order.
  std::mutex allocated_mutex;
  std::vector<at::Tensor> allocated;
  std::vector<int64_t> received_splits;  // alltoall
  int last_rank = -1;                    // join
};

class HandleTable {
 public:
  // Takes `op` (its handle set) and returns its id (> 0).
  int64_t Add(std::shared_ptr<PendingOp> op);
  // The op of `id`, or null if there is none (never issued or already synchronized).
  std::shared_ptr<PendingOp> Find(int64_t id) const;
  void Erase(int64_t id);
  // Erases every op whose handle completed and returns their ids (after kolo::shutdown(),
  // every op: those nobody synchronized would otherwise keep their tensors forever).
  std::vector<int64_t> EraseCompleted();

 private:
  mutable std::mutex mutex_;
  int64_t next_id_ = 1;                                // guarded by mutex_
  std::map<int64_t, std::shared_ptr<PendingOp>> ops_;  // guarded by mutex_
};

}  // namespace kolo::torch_ext
