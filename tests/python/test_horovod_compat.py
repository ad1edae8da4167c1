"""What a Horovod script may do that kolo refuses, with a message: a HOROVOD_* value kolo
cannot honour fails init with kolo's message (ValueError); init(comm=...) with a
subset of the ranks or an MPI communicator. Runs a one-rank job in a fresh process (init must
not have run)."""

import os
import subprocess
import sys

SCRIPT = """
import os, kolo.torch as hvd

def refused(call, error, text):
    try:
        call()
    except error as raised:
        assert text in str(raised), str(raised)
    else:
        raise SystemExit("no %s from %s" % (error.__name__, call))

os.environ["HOROVOD_CONTROLLER"] = "mpi"
refused(hvd.init, ValueError, "HOROVOD_CONTROLLER='mpi' is not supported: kolo's controller is "
        "gRPC; unset it or set gloo")
os.environ["HOROVOD_CONTROLLER"] = "gloo"  # what Horovod images set: accepted
os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"  # Horovod's test suites set it: accepted

refused(lambda: hvd.init(comm=object()), ValueError, "an MPI communicator cannot be passed")
refused(lambda: hvd.init(comm=[0, 1]), ValueError, "hvd.add_process_set([0, 1])")
assert not hvd.is_initialized()
hvd.init(comm=[0])
assert hvd.size() == 1

hvd.shutdown()
print("OK")
"""


def test_refusals_name_the_reason():
    env = dict(os.environ)
    for name in ("KOLO_RANK", "KOLO_SIZE", "KOLO_CONTROLLER"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stdout + done.stderr
