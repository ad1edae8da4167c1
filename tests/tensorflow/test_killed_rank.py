"""kolo.tensorflow: a killed rank makes the others raise HorovodInternalError eagerly, naming it,
within a deadline, and TensorFlow's AbortedError inside a tf.function
(no hang). Runs as one pytest process that starts a 3-rank job itself (not under kolorun,
which would stop the survivors as soon as one rank dies)."""

import os
import socket
import subprocess
import sys

DEADLINE_SECONDS = 90  # three TensorFlow imports on a loaded machine


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_killed_rank_makes_the_others_raise():
    size = 3
    env = dict(os.environ, KOLO_SIZE=str(size), KOLO_CONTROLLER="127.0.0.1:%d" % free_port(),
               KOLO_TIMEOUT_SECONDS="10", KOLO_LOG_LEVEL="error")
    script = os.path.join(os.path.dirname(__file__), "fault_rank.py")
    ranks = [subprocess.Popen([sys.executable, script], env=dict(env, KOLO_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(size)]
    outputs = []
    try:
        for process in ranks:
            outputs.append(process.communicate(timeout=DEADLINE_SECONDS)[0])
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
    assert ranks[-1].returncode == -9, outputs[-1]
    for r in range(size - 1):
        assert ranks[r].returncode == 0, "rank %d:\n%s" % (r, outputs[r])
        line = [l for l in outputs[r].splitlines() if l.startswith("RAISED")][0]
        seconds = float(line.split()[1])
        assert seconds < 15, line
        assert "rank %d lost" % (size - 1) in line, line
        assert "IN_FUNCTION AbortedError" in outputs[r], outputs[r]
