"""Keras mixed precision with kolo's DistributedOptimizer (issue 54; Horovod issue 3726's case):
a LossScaleOptimizer inside the distributed optimizer (DistributedOptimizer(LossScaleOptimizer(
opt))) and around it (LossScaleOptimizer(DistributedOptimizer(opt)), which Keras's compile makes
under a mixed_float16 policy), on the Keras this process has (ctest runs it on Keras 3 and on
tf-keras). What must hold: the ranks train to the same weights, and when the loss-scaled
gradients overflow on one rank only, every rank skips that step and lowers its loss scale
alike. Keras 3's LossScaleOptimizer around kolo's decides on each rank's own gradients before
its inner optimizer reduces them: without kolo's agreement on finiteness (optimizer.py,
_agree_on_finiteness) the rank that overflowed skipped the allreduce the others waited in
(the stall abort ended the test). docs/TENSORFLOW.md, "Mixed precision"."""

import os

import numpy as np
import pytest
import tensorflow as tf

import kolo.tensorflow as hvd_tf
import kolo.tensorflow.keras as hvd

keras = tf.keras
RANK = hvd.rank()
SIZE = hvd.size()
TF_KERAS = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
multi_rank = pytest.mark.skipif(SIZE < 2, reason="needs 2 or more ranks")


def loss_scale_optimizer(inner):
    return keras.mixed_precision.LossScaleOptimizer(inner)


def scale_of(optimizer):
    """The current loss scale of the LossScaleOptimizer `optimizer` is or wraps."""
    for candidate in (optimizer, getattr(optimizer, "inner_optimizer", None)):
        scale = getattr(candidate, "dynamic_scale", None)
        if scale is None and candidate is not None and hasattr(candidate, "loss_scale"):
            scale = candidate.loss_scale
        if scale is not None:
            return float(tf.convert_to_tensor(scale).numpy())
    raise AssertionError("no loss scale in %r" % (optimizer,))


def same_on_every_rank(values):
    flat = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for v in values])
    gathered = hvd_tf.allgather(tf.constant(flat[None, :])).numpy()
    return all(np.array_equal(gathered[0], row) for row in gathered)


def make(order):
    sgd = keras.optimizers.SGD(0.01)
    if order == "inside":
        return hvd.DistributedOptimizer(loss_scale_optimizer(sgd))
    return loss_scale_optimizer(hvd.DistributedOptimizer(sgd))


def step(optimizer, variable, factor):
    """One training step of loss factor * sum(variable^2), through the API this Keras's
    LossScaleOptimizer is used with in a custom loop: on tf-keras minimize (compute_gradients
    then apply_gradients), on Keras 3 scale_loss, a tape and apply_gradients."""
    def loss():
        return tf.reduce_sum(variable * variable) * factor
    if TF_KERAS:
        optimizer.minimize(loss, [variable])
        return
    with tf.GradientTape() as tape:
        scaled = optimizer.scale_loss(loss())
    optimizer.apply_gradients(zip(tape.gradient(scaled, [variable]), [variable]))


@multi_rank
@pytest.mark.parametrize("order", ["inside", "around"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "tf_function"])
def test_an_overflow_on_one_rank_skips_the_step_on_every_rank(order, compiled):
    optimizer = make(order)
    variable = tf.Variable([1.0, -2.0])
    run = tf.function(step) if compiled else step
    # 1e36 * 2^15 overflows float32 on rank 1 only.
    run(optimizer, variable, tf.constant(1e36 if RANK == 1 else 1.0))
    assert variable.numpy().tolist() == [1.0, -2.0]  # skipped everywhere
    first_scale = scale_of(optimizer)
    assert first_scale == 2.0 ** 14 and same_on_every_rank([first_scale])
    run(optimizer, variable, tf.constant(1.0))
    assert np.allclose(variable.numpy(), [1.0 - 0.02, -2.0 + 0.04])  # the average, applied
    assert same_on_every_rank([variable.numpy(), [scale_of(optimizer)]])


@pytest.mark.parametrize("order", ["inside", "around", "compile"])
def test_model_fit_under_mixed_float16_ends_with_identical_weights(order):
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(RANK)
        model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(8, "tanh"),
                                  keras.layers.Dense(1, dtype="float32")])
        if order == "compile":  # compile wraps a LossScaleOptimizer around kolo's
            optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05))
        else:
            optimizer = make(order)
        model.compile(loss="mse", optimizer=optimizer)
        rng = np.random.default_rng(RANK)
        x = rng.normal(size=(32, 4)).astype(np.float32)
        y = x.sum(axis=1, keepdims=True)
        model.fit(x, y, batch_size=8, epochs=2, verbose=0,
                  callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
        assert isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer)
        assert same_on_every_rank(model.get_weights())
    finally:
        keras.mixed_precision.set_global_policy("float32")
