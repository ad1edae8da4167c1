"""torchrun's elastic restart with the kolo backend: a worker dies, torchrun stops the others and
starts every worker again, and the new workers' init_process_group("kolo") forms a new kolo job
through the same agent's store (torchrun prefixes its keys with the attempt, so nothing of the
first job's rendezvous is read again).

    torchrun --standalone --nproc-per-node 2 --max-restarts 1 torchrun_restart.py MARKER_DIR

Attempt 0: an all_reduce, then rank 1 exits with 17 and rank 0's next all_reduce must raise
DistBackendError naming rank 1 within 5 s; rank 0 then writes MARKER_DIR/attempt0-ok and exits
non-zero, so that torchrun restarts. Attempt 1: rank 0 checks the marker (attempt 0's check ran and
passed), both ranks run a few collectives with the right sums and end. A restart that never
comes, or a second job that cannot form, ends torchrun non-zero; every rank has a watchdog."""

import faulthandler
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import kolo.torch  # noqa: F401  (registers the backend)

faulthandler.dump_traceback_later(90, exit=True)
marker = os.path.join(sys.argv[1], "attempt0-ok")
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("kolo", timeout=timedelta(seconds=30))
rank, size = dist.get_rank(), dist.get_world_size()
expected = float(size * (size + 1) // 2)
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
assert t.tolist() == [expected] * 4, t

if attempt == 0:
    if rank == 0 and os.path.exists(marker):
        os.remove(marker)
    dist.barrier()
    if rank == 1:
        os._exit(17)  # dies without a word: torchrun sees it and restarts every worker
    start = time.monotonic()
    try:
        dist.all_reduce(t)
    except dist.DistBackendError as error:
        took = time.monotonic() - start
        assert "rank 1" in str(error), error
        assert took < 5, "the error came after %.1f s" % took
        print("attempt 0, rank 0: %s after %.3f s" % (str(error)[:120], took), flush=True)
        with open(marker, "w") as f:
            f.write("ok\n")
        sys.exit(3)
    print("attempt 0, rank 0: the all_reduce after rank 1 died returned", flush=True)
    sys.exit(4)

if rank == 0:
    assert os.path.exists(marker), "attempt 0's check did not pass (no %s)" % marker
for _ in range(5):
    t.fill_(float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [expected] * 4, t
dist.barrier()
print("attempt %d, rank %d: the restarted job ran its collectives" % (attempt, rank), flush=True)
dist.destroy_process_group()
