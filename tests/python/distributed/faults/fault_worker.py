"""One rank of test_faults.py's jobs, started with torchrun's variables (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT). argv: backend (kolo or gloo), scenario, timeout seconds.

- killed: the last rank SIGKILLs itself after a first all_reduce; the others all_reduce until
  one raises.
- silent: the last rank never calls the second all_reduce (it sleeps, then exits); the others'
  all_reduce must raise once the process group's timeout passed.
- reinit: init_process_group, all_reduce, destroy_process_group, twice; prints OK.
- late, late_subgroup (3 ranks: the group of ranks 0 and 1): rank 0's wait(timeout=2 s) for
  an all_reduce rank 1 has not called yet; rank 1 calls it once rank 0 raised. Each prints
  what it got ("RAISED ..." or "COMPLETED"); rank 0 then prints its tensor ("TENSOR [...]")
  once rank 1 is done.
- subgroup_silent (3 ranks): a group of ranks 0 and 1 made without timeout=; rank 1 never
  calls its second all_reduce; rank 0's must raise once init_process_group's timeout passed.
- churn (3 ranks): new_group([0, 1]), an all_reduce in it, destroy_process_group(group), over
  and over; the members print "CHURN <cycle> <RSS bytes> <shared-memory mappings>" as it goes.

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

def shm_mappings():
    """The shared-memory segments this process maps (kolo's segments live in /dev/shm)."""
    with open("/proc/self/maps") as maps:
        return len({line.split(None, 5)[5].strip() for line in maps
                    if "/dev/shm/" in line and len(line.split(None, 5)) == 6})


def rss_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def leave(store):
    """Once every rank is done (no rank leaves while others still need it in kolo's job),
    exits without shutting kolo down; rank 0, which hosts torch's store, leaves last."""
    store.set("done/%d" % rank, "1")
    store.wait(["done/%d" % r for r in range(size)], timedelta(seconds=60))
    store.set("bye/%d" % rank, "1")
    if rank == 0:
        store.wait(["bye/%d" % r for r in range(size)], timedelta(seconds=60))
    sys.stdout.flush()
    os._exit(0)


def report(start, error):
    print("RAISED %.2f %s %s" % (time.monotonic() - start, type(error).__name__,
                                 str(error).splitlines()[0]), flush=True)


if scenario in ("late", "late_subgroup"):
    init()
    store = dist.distributed_c10d._get_default_store()
    group = dist.new_group([0, 1]) if scenario == "late_subgroup" else None
    if rank == 0:
        tensor = torch.ones(4)
        start = time.monotonic()
        work = dist.all_reduce(tensor, group=group, async_op=True)
        try:
            work.wait(timeout=timedelta(seconds=2))
            print("COMPLETED", flush=True)
        except Exception as error:  # noqa: BLE001
            report(start, error)
        store.set("rank0/waited", "1")
        store.wait(["rank1/called"], timedelta(seconds=60))
        time.sleep(1)  # what a late completion would write lands within this
        print("TENSOR %s" % tensor.tolist(), flush=True)
    elif rank == 1:
        store.wait(["rank0/waited"], timedelta(seconds=60))
        time.sleep(1)  # "3 s later" than rank 0's call: after its wait gave up
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4), group=group)
            print("COMPLETED", flush=True)
        except Exception as error:  # noqa: BLE001
            report(start, error)
        store.set("rank1/called", "1")
    leave(store)

if scenario == "subgroup_silent":
    init()
    store = dist.distributed_c10d._get_default_store()
    group = dist.new_group([0, 1])
    if rank == 0:
        dist.all_reduce(torch.ones(4), group=group)
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4), group=group)
            print("NOT RAISED", flush=True)
        except Exception as error:  # noqa: BLE001
            report(start, error)
    elif rank == 1:
        dist.all_reduce(torch.ones(4), group=group)  # and never the second
    leave(store)

if scenario == "churn":
    init()
    store = dist.distributed_c10d._get_default_store()
    for cycle in range(int(os.environ.get("CHURN_CYCLES", "60"))):
        group = dist.new_group([0, 1])
        if rank in (0, 1):
            tensor = torch.ones(1024)
            dist.all_reduce(tensor, group=group)  # its first response maps the set's segment
            assert tensor[0].item() == 2.0, tensor
            print("CHURN %d %d %d" % (cycle, rss_bytes(), shm_mappings()), flush=True)
        dist.destroy_process_group(group)
    dist.barrier()
    leave(store)

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
