"""A driver interrupted (SIGINT, as Ctrl-C) in the middle of a job: the driver exits, and every
rank's process, every process the driver started (kolorun and its worker proxies, Spark's JVMs
and Python workers) is gone within a bound, and kolo left nothing in /dev/shm. On RayExecutor
and ElasticRayExecutor (the driver connected to a running Ray cluster, which stays) and on
kolo.spark.run (the driver's own local-cluster)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import kolo_shm_segments

pytestmark = pytest.mark.slow

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "interrupted_driver.py")


def _descendants(pid):
    """Every process below `pid` now."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _interrupt(mode, *args):
    folder = tempfile.mkdtemp()
    before = kolo_shm_segments()
    log = open(os.path.join(folder, "driver.log"), "w")  # Spark's shutdown is loud
    driver = subprocess.Popen([sys.executable, DRIVER, mode, folder] + list(args),
                              stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert driver.stdout.readline().strip() == "running", "the job did not start"
        ranks = [int(f.split(".")[1]) for f in os.listdir(folder) if f.startswith("rank.")]
        started = _descendants(driver.pid)
        assert len(ranks) == 2 and all(_alive(p) for p in ranks)
        interrupted = time.monotonic()
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=60)
        left = [p for p in ranks + started if _alive(p)]
        deadline = time.monotonic() + 30
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = [p for p in left if _alive(p)]
        elapsed = time.monotonic() - interrupted
    finally:
        if driver.poll() is None:
            driver.kill()
        log.close()
    print(open(os.path.join(folder, "driver.log")).read()[-3000:], file=sys.stderr)
    assert not left, "still running %.0f s after the interrupt: %s" % (elapsed, [
        open("/proc/%d/cmdline" % p).read().replace("\0", " ")[:120] for p in left])
    assert kolo_shm_segments() - before == set()
    print("%s: driver and every process of the job gone %.1f s after SIGINT" % (mode, elapsed))


def test_ray_driver_interrupted(ray_cluster):
    _interrupt("ray", ray_cluster.get_runtime_context().gcs_address)


def test_elastic_ray_driver_interrupted(ray_cluster):
    _interrupt("ray-elastic", ray_cluster.get_runtime_context().gcs_address)


def test_spark_driver_interrupted():
    _interrupt("spark")
