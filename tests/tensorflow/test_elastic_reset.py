"""kolo.tensorflow across a reset, in a fixed 2-rank job under kolorun: shutdown() then init() in
the same process leaves it usable (rank and size, eager and tf.function ops, unnamed ops numbered
alike on every rank again, process sets forgotten with a clear error), and hvd.elastic.run
around a tf.function training loop that fails twice (every rank raises HorovodInternalError once;
later only the last rank does, and the other learns it from its next op, inside the tf.function)
restores the last commit, re-forms the job, syncs from rank 0 and ends with the weights of a run
that never failed, the same on both ranks."""

import numpy as np
import pytest
import tensorflow as tf

import kolo.tensorflow as hvd

SIZE = hvd.size()
pytestmark = pytest.mark.skipif(SIZE != 2, reason="the reset tests run at 2 ranks")

STEPS, COMMIT_EVERY = 10, 3
FAILURES = {4: "every", 8: "last"}  # step -> who raises there


def test_shutdown_then_init_leaves_kolo_tensorflow_usable():
    rank = hvd.rank()
    solo = hvd.add_process_set([0])

    @tf.function
    def total(x):
        return hvd.allreduce(x, op=hvd.Sum)
    assert total(tf.constant([1.0])).numpy().tolist() == [2.0]
    hvd.allreduce(tf.constant([1.0]))  # unnamed: number 0 on both ranks
    if rank == 0:  # an unnamed op refused before it reached kolo: rank 0 counted one more
        with pytest.raises(tf.errors.FailedPreconditionError):
            hvd.allgather(tf.constant(1.0))

    hvd.shutdown()
    assert not hvd.is_initialized()
    hvd.init()
    assert (hvd.rank(), hvd.size()) == (rank, SIZE)
    # Unnamed ops are numbered from 0 again on every rank: these match up (else they stall).
    assert hvd.allreduce(tf.constant([float(rank)]), op=hvd.Sum).numpy().tolist() == [1.0]
    assert hvd.allgather(tf.constant([rank])).numpy().tolist() == [0, 1]
    assert total(tf.constant([2.0])).numpy().tolist() == [4.0]  # traced before the reset
    assert solo.process_set_id is None  # kolo forgot its sets at shutdown: so did Python
    with pytest.raises(ValueError, match="has not been added"):
        hvd.allreduce(tf.constant([1.0]), process_set=solo)
    again = hvd.add_process_set([0])
    if rank == 0:
        assert hvd.allreduce(tf.constant([3.0]), process_set=again).numpy().tolist() == [3.0]
    hvd.remove_process_set(again)


def batch(step, rank):
    generator = np.random.default_rng(1000 * step + rank)
    return (generator.standard_normal([4, 3]).astype(np.float32),
            generator.standard_normal([4, 1]).astype(np.float32))


def model_and_optimizer(seed):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])
    return model, tf.keras.optimizers.SGD(0.05, momentum=0.5)


def reference():
    """The job's training computed alone: each step's gradient the average of every rank's."""
    model, optimizer = model_and_optimizer(5)
    for step in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf.add_n([tf.reduce_mean(tf.square(model(x) - y))
                             for x, y in (batch(step, r) for r in range(SIZE))]) / SIZE
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return np.concatenate([v.numpy().reshape(-1) for v in model.trainable_variables])


def test_run_restores_resets_and_syncs_after_internal_errors():
    model, optimizer = model_and_optimizer(5 + hvd.rank())  # different: the sync fixes it
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, step=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    entered, failed = [], set()

    @hvd.elastic.run
    def train(state):
        entered.append(state.step)
        while state.step < STEPS:
            who = FAILURES.get(state.step)
            if who and state.step not in failed:
                failed.add(state.step)
                if who == "every" or hvd.rank() == hvd.size() - 1:
                    raise hvd.HorovodInternalError("injected at step %d" % state.step)
            train_step(*batch(state.step, hvd.rank()))
            state.step += 1
            if state.step % COMMIT_EVERY == 0:
                state.commit()
        return "done"

    assert train(state) == "done"
    assert entered == [0, 3, 6], entered  # restored to the commits before each failure
    assert resets == [SIZE, SIZE]
    assert state.step == STEPS
    weights = np.concatenate([v.numpy().reshape(-1) for v in model.trainable_variables])
    np.testing.assert_allclose(weights, reference(), rtol=0, atol=1e-5)
    everyone = hvd.allgather(tf.constant(weights[None, :])).numpy()
    assert (everyone == everyone[0]).all(), everyone
