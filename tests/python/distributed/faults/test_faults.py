"""Failures of a "kolo" job, each checked against gloo in the same situation: a killed rank makes
the others raise within the process group's timeout, a rank that never calls a collective makes
the others raise once that timeout passed (not before, and well within twice it), both as a
RuntimeError as gloo's; and init_process_group works again after destroy_process_group. One
pytest process starts each job itself, with torchrun's variables (not under kolorun, which
would stop the survivors as soon as one rank dies); every rank process has a watchdog."""

import os
import socket
import subprocess
import sys

import pytest
import torch.distributed as dist

WORKER = os.path.join(os.path.dirname(__file__), "fault_worker.py")
WATCHDOG_SECONDS = 90  # each rank process, torch import included


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(size, backend, scenario, timeout):
    env = dict(os.environ, WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), KOLO_LOG_LEVEL="error", OMP_NUM_THREADS="1")
    for name in list(env):
        if name.startswith("KOLO_") and name != "KOLO_LOG_LEVEL":
            del env[name]  # a torchrun-style job: kolo's rendezvous goes through torch's store
    ranks = [subprocess.Popen([sys.executable, WORKER, backend, scenario, str(timeout)],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(size)]
    outputs = []
    try:
        for process in ranks:
            outputs.append(process.communicate(timeout=WATCHDOG_SECONDS)[0])
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
    return ranks, outputs


def raised(output):
    lines = [line for line in output.splitlines() if line.startswith("RAISED")]
    assert lines, output
    _, seconds, kind, message = lines[0].split(" ", 3)
    return float(seconds), kind, message


@pytest.mark.parametrize("size", [2, 4])
def test_a_killed_rank_makes_the_others_raise_within_the_timeout_as_on_gloo(size):
    timeout = 20
    results = {}
    for backend in ("gloo", "kolo"):
        ranks, outputs = run_job(size, backend, "killed", timeout)
        assert ranks[-1].returncode == -9, outputs[-1]
        results[backend] = []
        for r in range(size - 1):
            assert ranks[r].returncode == 0, "%s rank %d:\n%s" % (backend, r, outputs[r])
            results[backend].append(raised(outputs[r]))
    for seconds, kind, message in results["kolo"]:
        assert seconds < timeout, (seconds, message)
        assert kind == "DistBackendError", (kind, message)
        assert "rank %d" % (size - 1) in message, message
    for _, kind, _ in results["gloo"]:
        assert issubclass(getattr(dist, kind, RuntimeError), RuntimeError), kind


@pytest.mark.parametrize("size", [2, 4])
def test_a_rank_that_never_calls_makes_the_others_raise_once_the_timeout_passed(size):
    timeout = 4
    results = {}
    for backend in ("gloo", "kolo"):
        ranks, outputs = run_job(size, backend, "silent", timeout)
        results[backend] = []
        for r in range(size - 1):
            assert ranks[r].returncode == 0, "%s rank %d:\n%s" % (backend, r, outputs[r])
            results[backend].append(raised(outputs[r]))
    for seconds, kind, message in results["kolo"]:
        assert timeout * 0.9 <= seconds < 2 * timeout, (seconds, message)
        assert kind == "DistBackendError", (kind, message)
        assert "did not complete within 4000 ms" in message, message
    for _, kind, _ in results["gloo"]:
        assert issubclass(getattr(dist, kind, RuntimeError), RuntimeError), kind


@pytest.mark.parametrize("size", [2, 4])
def test_init_process_group_works_again_after_destroy_process_group(size):
    ranks, outputs = run_job(size, "kolo", "reinit", 30)
    for r in range(size):
        assert ranks[r].returncode == 0 and "OK" in outputs[r], "rank %d:\n%s" % (r, outputs[r])
        # Waiting for rank 0's store to close says nothing (torch's client would log a
        # "recvValue failed" warning and a C++ stack trace on every other rank).
        assert "recvValue" not in outputs[r] and "frame #" not in outputs[r], \
            "rank %d:\n%s" % (r, outputs[r])
