"""One rank of test_killed_rank.py's 3-rank job: the last rank kills itself (SIGKILL) after
a first allreduce; the others keep allreducing and must raise HorovodInternalError naming it.
Prints "RAISED <seconds> <message>" and exits 0 when that happens."""

import os
import signal
import sys
import time

import torch

import kolo.torch as hvd

hvd.init()
hvd.allreduce(torch.ones(4), name="before")
if hvd.rank() == hvd.size() - 1:
    os.kill(os.getpid(), signal.SIGKILL)
start = time.monotonic()
try:
    for step in range(100000):
        hvd.allreduce(torch.ones(4), name="after.%d" % step)
except hvd.HorovodInternalError as error:
    print("RAISED %.2f %s" % (time.monotonic() - start, error), flush=True)
    try:
        hvd.shutdown()
    except hvd.KoloError:
        pass  # shutdown after a job-fatal error returns that error
    sys.exit(0)
print("NOT RAISED", flush=True)
sys.exit(1)
