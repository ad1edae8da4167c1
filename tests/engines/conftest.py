"""pytest setup for the engines' suites (tests/engines/CMakeLists.txt): real Ray and real Spark
on loopback addresses only, from the engines venv (tools/install-deps.sh --engines).

- A watchdog: each test, its fixtures' setup included (a Ray or Spark start), has a deadline
  (TEST_DEADLINE_SECONDS, 240 by default); past it faulthandler prints every thread's stack
  and exits, so a hang fails with a message instead of holding ctest until its TIMEOUT.
- `ray_cluster`: one local Ray instance per module at 127.0.0.2. Ray 2.60 turns
  _node_ip_address="127.0.0.1" into this machine's interface address (resolve_ip_for_localhost),
  so the tests use another loopback address, which it keeps.
- `spark`: one SparkSession per module on `local-cluster[2,1,1024]` (a master, a worker and two
  executor JVMs: real processes), bound to 127.0.0.1.
- Tests marked `slow` run only with TEST_ENGINES_SLOW=1 (CI runs the fast set).
"""

from __future__ import annotations

import faulthandler
import glob
import os
import sys
import time

import pytest

DEADLINE_SECONDS = float(os.environ.get("TEST_DEADLINE_SECONDS", "240"))
RAY_ADDRESS = "127.0.0.2"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: runs only with TEST_ENGINES_SLOW=1")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TEST_ENGINES_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set TEST_ENGINES_SLOW=1 (ctest -L engines)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    sys.stderr.flush()
    faulthandler.dump_traceback_later(DEADLINE_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def kolo_shm_segments():
    """kolo's shared-memory segments now in /dev/shm (docs/DESIGN-NOTES.md: /kolo-<pid>-...)."""
    return set(glob.glob("/dev/shm/kolo-*"))


@pytest.fixture(scope="module")
def ray_cluster():
    import ray
    started = time.monotonic()
    ray.init(num_cpus=4, include_dashboard=False, _node_ip_address=RAY_ADDRESS,
             log_to_driver=True)
    print("ray.init: %.1f s" % (time.monotonic() - started), file=sys.stderr)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession
    started = time.monotonic()
    session = (SparkSession.builder.master("local-cluster[2,1,1024]")
               .appName("kolo-engines-test")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
               .config("spark.executorEnv.OMP_NUM_THREADS", "1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    print("SparkSession: %.1f s" % (time.monotonic() - started), file=sys.stderr)
    yield session
    session.stop()


def pytest_sessionfinish(session, exitstatus):
    """Exit 77 (ctest's SKIP_RETURN_CODE) when every test was skipped for being slow."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus != 0:
        return
    skipped = reporter.stats.get("skipped", [])
    ran = sum(len(reporter.stats.get(key, [])) for key in ("passed", "failed", "error"))
    if skipped and not ran:
        session.exitstatus = 77
