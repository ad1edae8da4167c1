"""N busy processes beside a Python benchmark's ranks (--busy N), as kolo-bench --busy starts
them (tools/bench/busy_load.h) and tools/bench/busy.sh starts them around the peers' programs:
each a `yes >/dev/null`, unbound (its CPU affinity reset to every online CPU, whatever the
rank's binding), at the parent's nice level, started by each host's first rank before the timed
part and stopped after it, and killed with the rank if it dies (PR_SET_PDEATHSIG)
(docs/PERFORMANCE.md, "On a busy machine")."""

import contextlib
import ctypes
import os
import signal
import subprocess

_PR_SET_PDEATHSIG = 1


def local_rank():
    """This process's index among its host's ranks, from the launcher's variables (0 without
    one)."""
    for variable in ("KOLO_LOCAL_RANK", "HOROVOD_LOCAL_RANK", "LOCAL_RANK",
                     "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"):
        if variable in os.environ:
            return int(os.environ[variable])
    return 0


def _unbound_child():
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    os.sched_setaffinity(0, range(os.cpu_count() or 1))


@contextlib.contextmanager
def busy(count):
    """Runs the block beside `count` busy processes when this is the host's first rank."""
    children = []
    try:
        if count > 0 and local_rank() == 0:
            for _ in range(count):
                children.append(subprocess.Popen(["yes"], stdout=subprocess.DEVNULL,
                                                 preexec_fn=_unbound_child))
        yield
    finally:
        for child in children:
            child.kill()
        for child in children:
            child.wait()


def add_argument(parser):
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N busy processes beside the ranks for the run, started by each "
                        "host's first rank (tools/bench/busy_load.py)")
