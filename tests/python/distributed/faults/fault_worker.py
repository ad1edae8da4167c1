"""One rank of test_faults.py's jobs, started with torchrun's variables (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT). argv: backend (kolo or gloo), scenario, timeout seconds.

- killed: the last rank SIGKILLs itself after a first all_reduce; the others all_reduce until
  one raises.
- silent: the last rank never calls the second all_reduce (it sleeps, then exits); the others'
  all_reduce must raise once the process group's timeout passed.
- reinit: init_process_group, all_reduce, destroy_process_group, twice; prints OK.

A rank that raised prints "RAISED <seconds> <exception class> <message>" and exits 0, a few
seconds later (without shutting down: its peers are gone or stuck)."""

import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

backend, scenario, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
if backend == "kolo":
    import kolo.torch.distributed  # noqa: F401

rank = int(os.environ["RANK"])
size = int(os.environ["WORLD_SIZE"])
last = rank == size - 1


def init():
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout))


if scenario == "reinit":
    for round_ in range(2):
        init()
        tensor = torch.full((3,), float(rank + round_))
        dist.all_reduce(tensor)
        assert tensor.tolist() == [float(sum(r + round_ for r in range(size)))] * 3, tensor
        dist.destroy_process_group()
    print("OK", flush=True)
    sys.exit(0)

init()
dist.all_reduce(torch.ones(4))
if scenario == "killed" and last:
    os.kill(os.getpid(), signal.SIGKILL)
if scenario == "silent" and last:
    time.sleep(3 * timeout)
    os._exit(0)
start = time.monotonic()
try:
    for step in range(1000000):
        dist.all_reduce(torch.ones(4))
        if scenario == "silent":
            break
except Exception as error:  # noqa: BLE001  (the class is what the test compares)
    print("RAISED %.2f %s %s" % (time.monotonic() - start, type(error).__name__,
                                 str(error).splitlines()[0]), flush=True)
    time.sleep(3)  # rank 0 hosts kolo's controller: the others report before it leaves
    os._exit(0)
print("NOT RAISED", flush=True)
sys.exit(1)
