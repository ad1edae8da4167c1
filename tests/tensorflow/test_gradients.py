"""The gradients of kolo.tensorflow's ops, registered as Horovod registers them, eagerly (a
GradientTape) and inside tf.function."""

import numpy as np
import pytest
import tensorflow as tf

import kolo.tensorflow as hvd
from horovod_reference import weighted_gradient

RANK = hvd.rank()
SIZE = hvd.size()


def gradient(fn, x, eager=True):
    """d/dx of sum(i * y_i) for y = fn(x): the output's gradient is its flat position."""
    def run(x):
        return weighted_gradient(fn, x)
    return run(x) if eager else tf.function(run)(x)


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tf_function"])
def test_allreduce_gradient_is_the_allreduce_of_the_output_gradient(eager):
    x = tf.ones([4]) * (RANK + 1)
    # loss = sum(i * y_i): dy = [0, 1, 2, 3]; Sum allreduce of it: size * i.
    grad = gradient(lambda v: hvd.allreduce(v, op=hvd.Sum), x, eager)
    np.testing.assert_allclose(grad.numpy(), SIZE * np.arange(4))
    grad = gradient(lambda v: hvd.allreduce(v, op=hvd.Average, postscale_factor=2.0), x, eager)
    np.testing.assert_allclose(grad.numpy(), 2.0 * np.arange(4))


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tf_function"])
def test_grouped_allreduce_gradient(eager):
    def fn(v):
        a, b = hvd.grouped_allreduce([v, v * 2], op=hvd.Sum)
        return a + b
    grad = gradient(fn, tf.ones([3]), eager)
    np.testing.assert_allclose(grad.numpy(), 3 * SIZE * np.arange(3))


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tf_function"])
def test_allgather_gradient_is_this_ranks_rows_of_the_averaged_gradient(eager):
    x = tf.ones([RANK + 1])  # different rows per rank
    grad = gradient(hvd.allgather, x, eager)
    # The output's gradient is its position; averaged over identical ranks it stays that.
    offset = RANK * (RANK + 1) // 2
    np.testing.assert_allclose(grad.numpy(), np.arange(offset, offset + RANK + 1))


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tf_function"])
def test_broadcast_gradient_goes_to_the_root_only(eager):
    grad = gradient(lambda v: hvd.broadcast(v, 0), tf.ones([3]), eager)
    expected = np.arange(3) if RANK == 0 else np.zeros(3)
    np.testing.assert_allclose(grad.numpy(), expected)


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tf_function"])
def test_alltoall_gradient_returns_rows_to_where_they_came_from(eager):
    def fn(v):
        out, _ = hvd.alltoall(v, splits=tf.ones([SIZE], tf.int32))
        return out
    grad = gradient(fn, tf.ones([SIZE]), eager)
    # Output row r came from rank r's row RANK; its gradient (r) goes back there.
    np.testing.assert_allclose(grad.numpy(), np.full(SIZE, RANK))


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tf_function"])
def test_reducescatter_gradient_is_the_scaled_allgather(eager):
    x = tf.ones([SIZE * 2])
    grad = gradient(lambda v: hvd.reducescatter(v, op=hvd.Sum), x, eager)
    # Horovod's: allgather of the part's gradient ([0, 1] on every rank) times size for Sum.
    np.testing.assert_allclose(grad.numpy(), SIZE * np.tile([0.0, 1.0], SIZE))
    grad = gradient(lambda v: hvd.reducescatter(v, op=hvd.Average), x, eager)
    np.testing.assert_allclose(grad.numpy(), np.tile([0.0, 1.0], SIZE))


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tf_function"])
def test_grouped_allgather_and_grouped_reducescatter_gradients(eager):
    grad = gradient(lambda v: hvd.grouped_allgather([v])[0], tf.ones([RANK + 1]), eager)
    offset = RANK * (RANK + 1) // 2
    np.testing.assert_allclose(grad.numpy(), np.arange(offset, offset + RANK + 1))
    grad = gradient(lambda v: hvd.grouped_reducescatter([v], op=hvd.Sum)[0], tf.ones([SIZE * 2]),
                    eager)
    np.testing.assert_allclose(grad.numpy(), SIZE * np.tile([0.0, 1.0], SIZE))
