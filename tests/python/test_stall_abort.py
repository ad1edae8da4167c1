"""An op only some ranks submit ends in an error within KOLO_STALL_SHUTDOWN_SECONDS (on by
default: 1800 s; 2 s here), naming the rank and the op, on every rank: no job waits forever
for a name that cannot match (issue 32). Starts its own 2-rank job (one pytest process)."""

import os
import re
import socket
import subprocess
import sys
import time

SHUTDOWN_SECONDS = 2.0

SCRIPT = """
import sys, time, torch, kolo.torch as hvd
hvd.init()
start = time.monotonic()
try:
    hvd.allreduce(torch.ones(2), name="only.rank%d" % hvd.rank())
except hvd.HorovodInternalError as error:
    print("RAISED %.2f %s %s" % (time.monotonic() - start, error.code, error), flush=True)
    try:
        hvd.shutdown()
    except hvd.KoloError:
        pass  # the job was aborted: shutdown reports it again
    sys.exit(0)
print("NOT RAISED", flush=True)
sys.exit(1)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_op_only_some_ranks_submitted_fails_everywhere_within_the_bound():
    env = dict(os.environ, KOLO_SIZE="2", KOLO_CONTROLLER="127.0.0.1:%d" % free_port(),
               KOLO_STALL_SHUTDOWN_SECONDS=str(SHUTDOWN_SECONDS), KOLO_STALL_CHECK_SECONDS="1",
               KOLO_LOG_LEVEL="error")
    start = time.monotonic()
    ranks = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=dict(env, KOLO_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    outputs = []
    try:
        for process in ranks:
            outputs.append(process.communicate(timeout=60)[0])
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
    for r, process in enumerate(ranks):
        assert process.returncode == 0, "rank %d:\n%s" % (r, outputs[r])
        line = [l for l in outputs[r].splitlines() if l.startswith("RAISED")][0]
        seconds, code = float(line.split()[1]), line.split()[2]
        assert code == "ABORTED", line
        assert SHUTDOWN_SECONDS / 2 <= seconds < 2 * SHUTDOWN_SECONDS + 1, line
        assert "KOLO_STALL_SHUTDOWN_SECONDS" in line, line
        assert re.search("never submitted 'only.rank[01]'", line), line
    assert time.monotonic() - start < 40
