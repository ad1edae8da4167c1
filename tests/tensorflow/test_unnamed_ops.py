"""Unnamed eager ops stay paired across ranks whatever failed on one of them (issue 53, F1): an
op refused on one rank before kolo took it (Adasum eagerly, a string tensor, alltoall splits
that do not add up, a broadcast root out of range) gives its number back, and a completed join
starts the numbering anew on every rank. Without that, every later unnamed op waits on a
different name on each rank until the stall abort; each test here has a watchdog far shorter
than conftest's deadline, so such a hang fails in WATCHDOG_SECONDS. Needs 2+ ranks (skipped on
1)."""

import faulthandler
import os
import sys
import threading

import pytest
import tensorflow as tf

import kolo.tensorflow as hvd
from kolo.tensorflow import op_names

WATCHDOG_SECONDS = 45

multi_rank = pytest.mark.skipif(hvd.size() < 2, reason="needs 2 or more ranks")


@pytest.fixture
def watchdog(request):
    """Past WATCHDOG_SECONDS the rank says which test hung, prints every thread's stack (past
    pytest's capture, which a process that exits would lose) and exits; kolorun then stops the
    others. The hang of mispaired unnamed ops fails fast, with a message."""
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def fire():
        if capture is not None:
            capture.suspend_global_capture(in_=False)
        sys.stderr.write("\nWATCHDOG: %s did not finish in %d s on rank %d (unnamed ops waiting "
                         "on different names on each rank?); every thread's stack:\n"
                         % (request.node.name, WATCHDOG_SECONDS, hvd.rank()))
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(1)
    timer = threading.Timer(WATCHDOG_SECONDS, fire)
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()


def _refuse(variant):
    """Calls an unnamed op that kolo refuses on this rank before taking it."""
    if variant == "adasum":
        with pytest.raises(NotImplementedError, match="Adasum"):
            hvd.allreduce(tf.ones([2]), op=hvd.Adasum)
    elif variant == "string":
        with pytest.raises(tf.errors.InvalidArgumentError, match="(?i)string") as info:
            hvd.allgather(tf.constant(["a"]))
        assert not op_names.submitted(info.value)
    elif variant == "splits":
        with pytest.raises(tf.errors.InvalidArgumentError, match="(?i)split") as info:
            hvd.alltoall(tf.ones([4]), splits=[1] * (hvd.size() - 1))
        assert not op_names.submitted(info.value)
    elif variant == "root":
        with pytest.raises(tf.errors.InvalidArgumentError, match="(?i)root") as info:
            hvd.broadcast(tf.ones([1]), root_rank=hvd.size() + 3)
        assert not op_names.submitted(info.value)
    elif variant == "grouped":
        with pytest.raises(tf.errors.InvalidArgumentError, match="(?i)string"):
            hvd.grouped_allgather([tf.ones([1]), tf.constant(["a"])])
    else:
        raise AssertionError(variant)


def _unnamed_ops_pair():
    """A few unnamed ops of several kinds, each checked: they complete only if every rank gave
    them the same names."""
    size = hvd.size()
    assert hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy().tolist() == [size] * 2
    gathered = hvd.allgather(tf.constant([float(hvd.rank())]))
    assert gathered.numpy().tolist() == [float(r) for r in range(size)]
    assert hvd.broadcast(tf.constant([hvd.rank()]), 0).numpy().tolist() == [0]
    assert [t.numpy().tolist() for t in hvd.grouped_allreduce(
        [tf.ones([1]), tf.ones([2])], op=hvd.Sum)] == [[size], [size] * 2]


@multi_rank
@pytest.mark.parametrize("variant", ["adasum", "string", "splits", "root", "grouped"])
def test_an_op_refused_on_one_rank_does_not_shift_the_numbering(variant, watchdog):
    if hvd.rank() != 0:
        _refuse(variant)
        _refuse(variant)  # twice: a number given back is taken and given back again
    _unnamed_ops_pair()


@multi_rank
def test_an_op_kolo_took_keeps_its_number_and_its_error_says_so(watchdog):
    # Ranks that disagree on the shape: kolo took the op on every rank, and it fails on every
    # rank (a mismatch), so every rank keeps the number.
    with pytest.raises(tf.errors.FailedPreconditionError) as info:
        hvd.allreduce(tf.ones([1 + hvd.rank()]))
    assert op_names.submitted(info.value)
    _unnamed_ops_pair()


@multi_rank
def test_unnamed_ops_pair_after_a_join_some_ranks_reached_first(watchdog):
    # Rank 0 joins at once; the others run unnamed allreduces rank 0 never numbers (it adds
    # zeros), then join. After the join every rank numbers from the same start again.
    if hvd.rank() == 0:
        last = int(hvd.join().numpy())
        assert 1 <= last < hvd.size()
    else:
        for _ in range(3):
            result = hvd.allreduce(tf.ones([2]), op=hvd.Sum)
            assert result.numpy().tolist() == [hvd.size() - 1] * 2
        hvd.join()
    _unnamed_ops_pair()
