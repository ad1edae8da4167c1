"""pytest setup for kolo.runner's tests: this process is the caller of run(), not a rank, so it
does not join a kolo job (tests/python/conftest.py's init is cut off by --confcutdir). Every
test has a deadline (KOLO_TEST_DEADLINE_SECONDS, 120 by default): past it, faulthandler prints
every thread's stack and exits, so a stuck job fails with a message."""

import faulthandler
import os
import sys

import pytest

DEADLINE_SECONDS = float(os.environ.get("KOLO_TEST_DEADLINE_SECONDS", "120"))


@pytest.fixture(autouse=True)
def deadline():
    sys.stderr.flush()
    faulthandler.dump_traceback_later(DEADLINE_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
