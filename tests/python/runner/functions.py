"""Functions test_runner.py runs with kolo.runner.run on 2 ranks (a module of their own, so
that pickle finds them by name in the ranks without cloudpickle)."""

import os


def allreduce_rank(scale, offset=0):
    """Joins the job, sums every rank's (rank + 1) * scale; returns (rank, size, sum + offset,
    this process's id)."""
    import torch
    import kolo.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.full((2,), float(hvd.rank() + 1) * scale), op=hvd.Sum,
                          name="runner.sum")
    result = (hvd.rank(), hvd.size(), total[0].item() + offset, os.getpid())
    hvd.shutdown()
    return result


def fail_on_rank_1():
    """Raises ValueError on rank 1; rank 0 waits for a peer that is stopped."""
    if os.environ["KOLO_RANK"] == "1":
        raise ValueError("rank 1 gives up")
    import time
    time.sleep(30)
    return "rank 0 was not stopped"
