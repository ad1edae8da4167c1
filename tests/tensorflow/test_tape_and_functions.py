"""DistributedGradientTape (eager and tf.function, groups, local sources, sparse gradients),
broadcast_variables, broadcast_object and allgather_object."""

import numpy as np
import pytest
import tensorflow as tf

import kolo.tensorflow as hvd

RANK = hvd.rank()
SIZE = hvd.size()
MEAN_RANK_PLUS_ONE = (SIZE + 1) / 2


def linear_problem():
    """w and b whose loss gradients on rank r are (r + 1) * [1, 2, 3] and (r + 1)."""
    w = tf.Variable([0.0, 0.0, 0.0])
    b = tf.Variable(0.0)
    x = tf.constant([1.0, 2.0, 3.0]) * (RANK + 1)

    def loss():
        return tf.reduce_sum(w * x) + b * (RANK + 1)
    return w, b, loss


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "tf_function"])
def test_distributed_gradient_tape_averages_gradients(eager):
    w, b, loss = linear_problem()

    def step():
        with tf.GradientTape() as tape:
            value = loss()
        tape = hvd.DistributedGradientTape(tape)
        return tape.gradient(value, [w, b])
    gw, gb = step() if eager else tf.function(step)()
    np.testing.assert_allclose(gw.numpy(), MEAN_RANK_PLUS_ONE * np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(gb.numpy(), MEAN_RANK_PLUS_ONE)


@pytest.mark.parametrize("groups", [1, 2], ids=["one_group", "two_groups"])
def test_distributed_gradient_tape_groups_sum_and_predivide(groups):
    w, b, loss = linear_problem()
    with tf.GradientTape() as tape:
        value = loss()
    gw, gb = hvd.DistributedGradientTape(tape, op=hvd.Sum, groups=groups).gradient(value, [w, b])
    total = SIZE * MEAN_RANK_PLUS_ONE
    np.testing.assert_allclose(gw.numpy(), total * np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(gb.numpy(), total)
    with tf.GradientTape() as tape:
        value = loss()
    gw, gb = hvd.DistributedGradientTape(tape, gradient_predivide_factor=2.0,
                                         groups=[[w, b]]).gradient(value, [w, b])
    np.testing.assert_allclose(gw.numpy(), MEAN_RANK_PLUS_ONE * np.array([1.0, 2.0, 3.0]),
                               rtol=1e-6)


def test_local_sources_are_scaled_not_reduced():
    w, b, loss = linear_problem()
    with tf.GradientTape() as tape:
        value = loss()
    tape = hvd.DistributedGradientTape(tape)
    tape.register_local_source(b)
    gw, gb = tape.gradient(value, [w, b])
    np.testing.assert_allclose(gb.numpy(), (RANK + 1) / SIZE)
    np.testing.assert_allclose(gw.numpy(), MEAN_RANK_PLUS_ONE * np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_gradients_are_gathered_or_densified(sparse_as_dense):
    table = tf.Variable(tf.zeros([SIZE, 2]))
    with tf.GradientTape() as tape:
        value = tf.reduce_sum(tf.gather(table, [RANK])) * (RANK + 1)
    grad, = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense).gradient(
        value, [table])
    assert isinstance(grad, tf.IndexedSlices) != sparse_as_dense
    dense = tf.convert_to_tensor(grad).numpy()
    np.testing.assert_allclose(dense[:, 0], (np.arange(SIZE) + 1) / SIZE)


def test_tape_gradient_with_none_for_an_unused_variable():
    w, b, loss = linear_problem()
    unused = tf.Variable(1.0)
    with tf.GradientTape() as tape:
        value = loss()
    gw, gu = hvd.DistributedGradientTape(tape).gradient(value, [w, unused])
    assert gu is None and gw is not None


def test_broadcast_variables_assigns_the_roots_values():
    variables = [tf.Variable(tf.fill([2, 2], float(RANK))), tf.Variable(RANK, dtype=tf.int64)]
    hvd.broadcast_variables(variables, root_rank=SIZE - 1)
    np.testing.assert_array_equal(variables[0].numpy(), np.full([2, 2], SIZE - 1))
    assert variables[1].numpy() == SIZE - 1


def test_broadcast_object_and_allgather_object():
    obj = {"rank": RANK, "payload": list(range(RANK + 3))}
    assert hvd.broadcast_object(obj, root_rank=0) == {"rank": 0, "payload": [0, 1, 2]}
    gathered = hvd.allgather_object(obj)
    assert [o["rank"] for o in gathered] == list(range(SIZE))
    assert gathered[-1]["payload"] == list(range(SIZE + 2))


def test_horovod_internal_error_is_a_runtime_error_and_hvd_elastic_has_horovods_names():
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    for name in ("run", "State", "ObjectState", "TensorFlowState", "TensorFlowKerasState"):
        assert hasattr(hvd.elastic, name), name  # test_elastic_reset.py uses them


def test_one_horovod_internal_error_wherever_horovods_scripts_import_it():
    import kolo.common.errors
    import kolo.common.exceptions
    import kolo.keras
    import kolo.tensorflow.elastic
    import kolo.tensorflow.keras
    one = kolo.common.errors.HorovodInternalError
    for module in (kolo.common.exceptions, hvd, kolo.tensorflow.elastic, kolo.tensorflow.keras,
                   kolo.keras):
        assert module.HorovodInternalError is one, module.__name__
    assert kolo.common.exceptions.HostsUpdatedInterrupt is hvd.HostsUpdatedInterrupt
    assert one("lost", "ABORTED").job_failed and not one("shapes", "MISMATCH").job_failed


def test_partial_tape_keeps_local_layers_gradients_local():
    shared = tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
    local = tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
    x = tf.constant([[float(RANK + 1)]])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(shared(x) + local(x))
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[local])
    g_shared, g_local = tape.gradient(loss, [shared.kernel, local.kernel])
    np.testing.assert_allclose(g_shared.numpy(), [[MEAN_RANK_PLUS_ONE]])
    np.testing.assert_allclose(g_local.numpy(), [[(RANK + 1) / SIZE]])  # scaled, not reduced
