"""Horovod's process sets on kolo.tensorflow (4 ranks): ops and the tape among a set's members,
ranks outside refused with kolo's message, sets added and removed collectively."""

import numpy as np
import pytest
import tensorflow as tf

import kolo.tensorflow as hvd

RANK = hvd.rank()
SIZE = hvd.size()
pytestmark = pytest.mark.skipif(SIZE != 4, reason="process set tests run at 4 ranks")


@pytest.fixture(scope="module")
def halves():
    even = hvd.add_process_set([0, 2])
    odd = hvd.add_process_set(hvd.ProcessSet([1, 3]))
    yield even, odd
    hvd.remove_process_set(even)
    hvd.remove_process_set(odd)


def test_sets_know_their_ranks(halves):
    even, odd = halves
    mine, other = (even, odd) if RANK % 2 == 0 else (odd, even)
    assert mine.included() and not other.included()
    assert mine.size() == 2 and mine.rank() == RANK // 2
    assert hvd.global_process_set.size() == SIZE
    with pytest.raises(ValueError):
        other.rank()


def test_ops_run_among_the_sets_members(halves):
    even, odd = halves
    mine = even if RANK % 2 == 0 else odd
    total = hvd.allreduce(tf.constant([float(RANK)]), op=hvd.Sum, process_set=mine)
    assert total.numpy().tolist() == [sum(mine.ranks)]
    gathered = hvd.allgather(tf.constant([RANK]), process_set=mine)
    assert gathered.numpy().tolist() == mine.ranks
    root = mine.ranks[-1]  # a job rank
    assert hvd.broadcast(tf.constant(RANK), root, process_set=mine).numpy() == root
    part = hvd.reducescatter(tf.ones([4]), op=hvd.Sum, process_set=mine)
    assert part.numpy().tolist() == [2.0, 2.0]
    out, received = hvd.alltoall(tf.constant([RANK, RANK]), splits=[1, 1], process_set=mine)
    assert out.numpy().tolist() == mine.ranks and received.numpy().tolist() == [1, 1]

    @tf.function
    def in_function(x):
        return hvd.allreduce(x, op=hvd.Sum, process_set=mine)
    assert in_function(tf.constant([1.0])).numpy().tolist() == [2.0]


def test_a_rank_outside_the_set_is_refused(halves):
    even, odd = halves
    other = odd if RANK % 2 == 0 else even
    with pytest.raises(tf.errors.InvalidArgumentError, match="process set"):
        hvd.allreduce(tf.constant([1.0]), process_set=other)


def test_tape_reduces_within_the_set(halves):
    even, odd = halves
    mine = even if RANK % 2 == 0 else odd
    w = tf.Variable([1.0])
    with tf.GradientTape() as tape:
        loss = w * float(RANK)
    grad, = hvd.DistributedGradientTape(tape, process_set=mine).gradient(loss, [w])
    assert grad.numpy().tolist() == [sum(mine.ranks) / 2]


def test_adding_the_same_ranks_twice_is_refused(halves):
    with pytest.raises(ValueError, match="exists already"):
        hvd.add_process_set([0, 2])
