"""pytest setup for kolo.tensorflow's suites. ctest runs each suite under kolorun at 1, 2 or 4
ranks (tests/tensorflow/CMakeLists.txt): every rank runs the same tests in the same order, so
unnamed ops match up. One init per process; every test has a deadline
(KOLO_TEST_DEADLINE_SECONDS, 90 by default: TensorFlow traces functions slowly on a loaded
machine): past it, faulthandler prints every thread's stack and exits the rank, and kolorun stops
the others. TEST_INIT_PROCESS_SETS ("0,1/2,3") makes init take those static process sets.
"""

import faulthandler
import os
import sys

import pytest
import tensorflow as tf

import kolo.tensorflow as hvd

DEADLINE_SECONDS = float(os.environ.get("KOLO_TEST_DEADLINE_SECONDS", "90"))

STATIC_PROCESS_SETS = [
    hvd.ProcessSet([int(r) for r in part.split(",")])
    for part in os.environ.get("TEST_INIT_PROCESS_SETS", "").split("/") if part.strip()]


def pytest_configure(config):
    # Before collection: modules may ask hvd.size() to skip tests.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    hvd.init(process_sets=STATIC_PROCESS_SETS or None)


def pytest_unconfigure(config):
    hvd.shutdown()


@pytest.fixture
def static_process_sets():
    return STATIC_PROCESS_SETS


@pytest.fixture(autouse=True)
def deadline(request):
    sys.stderr.flush()
    faulthandler.dump_traceback_later(DEADLINE_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()
