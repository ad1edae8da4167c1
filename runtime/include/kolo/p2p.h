// kolo's point-to-point ops (docs/P2P.md): a tensor sent by one rank and received by another,
// matched by the pair alone. No controller round and no other rank takes part: a send waits only
// for its receiver, a receive only for its sender.
//
// Matching: a send to rank d with tag t, issued in process set s, meets a receive on rank d
// posted in set s for tag t from this rank (or from any rank, kAnySource). Per pair, set and tag
// the order is FIFO: the n-th send from a to b with tag t meets the n-th receive b posts for a
// with tag t (as in c10d and MPI). A receive from any rank takes the earliest send that arrived
// (in arrival order) among its set's ranks. Sends and receives with other tags, or between other
// pairs, are independent: none waits on them.
//
// Ranks are ranks of the calling thread's current process set (kolo::ProcessSetScope; the job by
// default), as for every kolo op. A pair must agree on the tensor: the same dtype and the same
// number of bytes, else both ops fail with kMismatch naming both sides. The shape is not compared
// (a [2, 3] tensor may be received into a [6] one).
//
// Completion: a receive completes once the data is in its tensor; a send once the receiver has
// it (small tensors) or it left for the receiver (large ones): in either case its tensor may be
// reused. A send whose receiver never posts the receive, or a receive that no send meets, fails
// with kDeadlineExceeded after P2pOptions::timeout_seconds naming the peer and the tag; an op
// whose peer died or shut down fails at once naming it; an aborted job fails them all. Nothing
// waits forever. CPU tensors only (a GPU tensor fails at enqueue).
//
// Threading: any thread. Callbacks run once, never under a kolo lock, on kolo's point-to-point
// thread or on a thread waiting for a point-to-point op (a blocking Send/Recv, a handle's
// Synchronize, c10d's wait()), which moves the bytes itself and runs what completes meanwhile, as
// kolo's blocking collectives run their op's callback; they may post further ops (blocking calls
// from a callback fail with kFailedPrecondition). The tensors must stay valid until completion.
#pragma once

#include <cstdint>

#include "kolo/handle.h"
#include "kolo/op_args.h"
#include "kolo/status.h"
#include "kolo/types.h"

namespace kolo {

class Runtime;
class RuntimeImpl;

// A receive's `src` for "from whichever rank sends first".
inline constexpr int kAnySource = -1;

struct P2pOptions {
  // How long the op may wait for its peer's matching op (and, once matched, for bytes to move):
  // <= 0 takes KOLO_TIMEOUT_SECONDS.
  double timeout_seconds = 0;
};

// Point-to-point ops on one Runtime. A view: cheap to make, valid while the Runtime lives.
class PointToPoint {
 public:
  explicit PointToPoint(Runtime& runtime);

  // Sends `tensor` to rank `dst` under `tag` (any value; both ends pass the same).
  Status SendAsync(const TensorView& tensor, int dst, int64_t tag, const P2pOptions& options,
                   Callback callback);
  StatusOr<Handle> SendAsync(const TensorView& tensor, int dst, int64_t tag,
                             const P2pOptions& options = {});
  Status Send(const TensorView& tensor, int dst, int64_t tag, const P2pOptions& options = {});

  // Receives into `tensor` from rank `src` (or kAnySource) under `tag`; `*source` (may be null;
  // must outlive the op) is set to the sender's rank before completion.
  Status RecvAsync(const TensorView& tensor, int src, int64_t tag, int* source,
                   const P2pOptions& options, Callback callback);
  StatusOr<Handle> RecvAsync(const TensorView& tensor, int src, int64_t tag, int* source = nullptr,
                             const P2pOptions& options = {});
  // Returns the sender's rank.
  StatusOr<int> Recv(const TensorView& tensor, int src, int64_t tag,
                     const P2pOptions& options = {});

 private:
  RuntimeImpl* impl_;
};

// The same on the default runtime (kolo::init()); kNotInitialized-style FailedPrecondition
// without one.
Status send_async(const TensorView& tensor, int dst, int64_t tag, const P2pOptions& options,
                  Callback callback);
StatusOr<Handle> send_async(const TensorView& tensor, int dst, int64_t tag,
                            const P2pOptions& options = {});
Status send(const TensorView& tensor, int dst, int64_t tag, const P2pOptions& options = {});
Status recv_async(const TensorView& tensor, int src, int64_t tag, int* source,
                  const P2pOptions& options, Callback callback);
StatusOr<Handle> recv_async(const TensorView& tensor, int src, int64_t tag, int* source = nullptr,
                            const P2pOptions& options = {});
StatusOr<int> recv(const TensorView& tensor, int src, int64_t tag, const P2pOptions& options = {});

}  // namespace kolo
