"""pytest setup for the torch.distributed backend's suites (ctest runs them under kolorun and
under torchrun, at 2 and 4 ranks: tests/python/CMakeLists.txt). Every rank runs the same tests
in the same order. The session starts the "kolo" process group once, with a gloo group over
every rank beside it (made through kolo's new_group: the peer every result is compared with),
and destroys both at the end. Every test has a deadline (KOLO_TEST_DEADLINE_SECONDS, 60 by
default): past it faulthandler prints every thread's stack and exits the rank, so a stuck
collective fails the suite with a message instead of hanging ctest. pytest runs with
--confcutdir here, so kolo.torch's own conftest (which calls hvd.init()) is not loaded.
"""

import faulthandler
import os
import sys
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

import kolo.torch.distributed  # noqa: F401  (registers "kolo")

DEADLINE_SECONDS = float(os.environ.get("KOLO_TEST_DEADLINE_SECONDS", "60"))
GROUPS = {}


def pytest_configure(config):
    torch.set_num_threads(1)
    dist.init_process_group("kolo", timeout=timedelta(seconds=30))
    GROUPS["gloo"] = dist.new_group(backend="gloo")


def pytest_unconfigure(config):
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.fixture
def gloo():
    return GROUPS["gloo"]


@pytest.fixture(autouse=True)
def deadline(request):
    sys.stderr.flush()
    faulthandler.dump_traceback_later(DEADLINE_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
