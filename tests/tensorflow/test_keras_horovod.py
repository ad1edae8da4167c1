"""What Horovod 0.28.1's own Keras tests (test/parallel/test_tensorflow2_keras.py) check, on
kolo.tensorflow.keras and kolo.keras, on the Keras this process has (ctest runs it on Keras 3
and on tf-keras, TF_USE_LEGACY_KERAS=1). Written for kolo, not copied: the same behaviours,
with values checked where Horovod's test only checks that nothing hangs. What reaches into a
wrapped optimizer (`_compute_gradients`, `_agg_helper`) is Horovod's tf-keras wrapper's and is
checked on tf-keras; on Keras 3 the same aggregation is checked through apply_gradients."""

import os

import numpy as np
import pytest
import tensorflow as tf

import kolo.keras as hvd_keras
import kolo.tensorflow as hvd_tf
import kolo.tensorflow.keras as hvd

keras = tf.keras
RANK = hvd.rank()
SIZE = hvd.size()
TF_KERAS = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
tf_keras_only = pytest.mark.skipif(not TF_KERAS, reason="Horovod's tf-keras wrapper's internals")
multi_rank = pytest.mark.skipif(SIZE < 2, reason="needs 2 or more ranks")


def same_on_every_rank(arrays):
    flat = np.concatenate([np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays])
    gathered = hvd_tf.allgather(tf.constant(flat[None, :])).numpy()
    return all(np.array_equal(gathered[0], row) for row in gathered)


def embedding_model():
    keras.utils.set_random_seed(7)
    return keras.Sequential([keras.Input(shape=(10,), dtype="int32"),
                             keras.layers.Embedding(1000, 8)])


def adding_optimizer():
    """An optimizer whose step adds the gradient to the variable (so the values tell which
    gradients were applied), in this Keras's form."""
    base = keras.optimizers.Optimizer

    class Adding(base):
        def __init__(self, name="adding", **kwargs):
            if TF_KERAS:
                super().__init__(name=name, **kwargs)
                self._learning_rate = self._build_learning_rate(0.1)
            else:
                kwargs.setdefault("learning_rate", 0.1)
                super().__init__(name=name, **kwargs)

        def update_step(self, gradient, variable, learning_rate=None):
            variable.assign_add(gradient)
    return Adding()


def test_sparse_as_dense_trains_an_embedding_to_the_same_weights():
    model = embedding_model()
    model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(
        keras.optimizers.RMSprop(0.001), sparse_as_dense=True))
    rng = np.random.default_rng(RANK)
    x = rng.integers(1000, size=(16, 10))
    y = rng.random((16, 10, 8)).astype(np.float32)
    for _ in range(2):
        model.train_on_batch(x, y)
    assert same_on_every_rank(model.get_weights())


def test_sparse_as_dense_with_aggregation_counts_passes_in_agg_helper():
    optimizer = hvd.DistributedOptimizer(keras.optimizers.RMSprop(0.001), sparse_as_dense=True,
                                         backward_passes_per_step=2)
    model = embedding_model()
    model.compile(loss="mse", optimizer=optimizer)
    rng = np.random.default_rng(RANK)
    x, y = rng.integers(1000, size=(16, 10)), rng.random((16, 10, 8)).astype(np.float32)
    for _ in range(3):
        model.train_on_batch(x, y)
    assert int(optimizer._agg_helper.counter.numpy()) == 3 % 2
    assert same_on_every_rank(model.get_weights())


def test_a_plain_optimizer_has_no_agg_helper():
    assert hvd.DistributedOptimizer(keras.optimizers.SGD())._agg_helper is None


def test_legacy_optimizer_trains():
    legacy = getattr(keras.optimizers, "legacy", None)
    if not TF_KERAS or legacy is None:
        pytest.skip("tf-keras's legacy optimizers (Keras 3 has none)")
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(2)])
    model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(legacy.Adam(0.01)))
    rng = np.random.default_rng(RANK)
    model.train_on_batch(rng.random((8, 3)), rng.random((8, 2)))
    assert same_on_every_rank(model.get_weights()) or SIZE == 1


def test_from_config_round_trips():
    wrapped = hvd.DistributedOptimizer(keras.optimizers.Adam(0.01))
    config = wrapped.get_config()
    assert wrapped.from_config(config).get_config() == config
    assert type(wrapped).from_config(config).get_config() == config


@tf_keras_only
def test_compute_gradients_reduces_as_horovods_wrapper_does():
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    x = tf.Variable([1.0, 2.0])
    pairs = optimizer._compute_gradients(lambda: tf.reduce_sum(x * float(RANK + 1)), [x])
    assert pairs[0][1] is x
    assert pairs[0][0].numpy().tolist() == [(SIZE + 1) / 2] * 2  # the average of rank + 1
    optimizer.apply_gradients(pairs)  # applied as they are, not reduced again
    assert np.allclose(x.numpy(), [1.0 - 0.1 * (SIZE + 1) / 2, 2.0 - 0.1 * (SIZE + 1) / 2])
    tape_pairs = optimizer.compute_gradients(lambda: tf.reduce_sum(x * float(RANK)), [x])
    assert tape_pairs[0][0].numpy().tolist() == [(SIZE - 1) / 2] * 2


@tf_keras_only
def test_minimize_reduces_once():
    optimizer = hvd.DistributedOptimizer(adding_optimizer(), op=hvd.Sum)
    x = tf.Variable([0.0])
    optimizer.minimize(lambda: x * float(RANK + 1), [x])
    assert x.numpy().tolist() == [sum(r + 1 for r in range(SIZE))]


@tf_keras_only
def test_aggregation_recovers_from_an_infinite_gradient():
    # The first cycle's gradient is infinite; the accumulators start from zero again, so the
    # second cycle's gradients are finite.
    passes = 2
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(), sparse_as_dense=True,
                                         backward_passes_per_step=passes)
    x = tf.Variable(0.0)
    calls = tf.Variable(0)

    def loss():
        calls.assign_add(1)
        return tf.cond(calls > 1, lambda: x, lambda: x * float("inf"))
    for _ in range(2 * passes):
        pairs = optimizer._compute_gradients(loss, [x])
        optimizer.apply_gradients(pairs)
    assert bool(tf.math.is_finite(pairs[0][0]))
    assert int(optimizer._agg_helper.counter.numpy()) == 0


def _aggregated_steps(optimizer, variables, loss, steps):
    """Runs `steps` passes in a tf.function, as model.fit does: on tf-keras through
    _compute_gradients and apply_gradients (Horovod's test's path), on Keras 3 through a tape
    and apply_gradients; yields after each."""
    @tf.function
    def step():
        if TF_KERAS:
            pairs = optimizer._compute_gradients(loss, var_list=variables)
            optimizer.apply_gradients(pairs, experimental_aggregate_gradients=False)
        else:
            with tf.GradientTape() as tape:
                value = loss()
            optimizer.apply_gradients(zip(tape.gradient(value, variables), variables))
    for index in range(steps):
        step()
        yield index


@pytest.mark.parametrize("average", [True, False])
def test_gradient_aggregation_applies_every_nth_pass(average):
    passes = 4
    optimizer = hvd.DistributedOptimizer(adding_optimizer(), backward_passes_per_step=passes,
                                         average_aggregated_gradients=average,
                                         sparse_as_dense=True)
    x, y = tf.Variable([0.0]), tf.Variable([1.0, 2.0])

    def loss():  # d/dx = 1, d/dy = [-1, 0] (an IndexedSlices, densified)
        return x - tf.gather(y, [0])
    for index in _aggregated_steps(optimizer, [x, y], loss, 10):
        applied = (index + 1) // passes
        per_apply = 1.0 if average else float(passes)
        assert np.allclose(x.numpy(), [applied * per_apply])
        assert np.allclose(y.numpy(), [1.0 - applied * per_apply, 2.0])
        assert int(optimizer.iterations.numpy()) == index + 1
    assert int(optimizer._agg_helper.counter.numpy()) == 10 % passes


@pytest.mark.parametrize("average", [True, False])
def test_gradient_aggregation_keeps_local_variables_local(average):
    passes, count, local = 4, 6, 3
    optimizer = hvd.DistributedOptimizer(adding_optimizer(), backward_passes_per_step=passes,
                                         average_aggregated_gradients=average,
                                         sparse_as_dense=True)
    xs = [tf.Variable([0.0]) for _ in range(count)]
    ys = [tf.Variable([1.0, 2.0]) for _ in range(count)]
    for i in range(local):
        optimizer.register_local_var(xs[i])
        optimizer.register_local_var(ys[i])
    weight = float(RANK + 1)

    def loss():  # d/dx = 1 and d/dy = [-(rank + 1), 0] for every pair
        return tf.add_n([x - weight * tf.gather(y, [0]) for x, y in zip(xs, ys)])
    for index in _aggregated_steps(optimizer, xs + ys, loss, 10):
        applied = (index + 1) // passes * (1.0 if average else float(passes))
        mean_weight = (SIZE + 1) / 2
        for i in range(count):
            x_step = 1.0 / SIZE if i < local else 1.0  # local: scaled by 1 / size
            y_step = weight / SIZE if i < local else mean_weight
            assert np.allclose(xs[i].numpy(), [applied * x_step]), (index, i)
            assert np.allclose(ys[i].numpy(), [1.0 - applied * y_step, 2.0]), (index, i)


def _constant_model(value):
    init = keras.initializers.Constant(value)
    return keras.Sequential([
        keras.Input(shape=(3,)),
        keras.layers.Dense(2, kernel_initializer=init, bias_initializer=init),
        keras.layers.RepeatVector(3),
        keras.layers.TimeDistributed(keras.layers.Dense(3, kernel_initializer=init,
                                                        bias_initializer=init))])


@multi_rank
@pytest.mark.parametrize("local_count", [0, 1, 2])
def test_partial_distributed_optimizer_keeps_local_layers_local(local_count):
    model = _constant_model(float(RANK))
    x = np.random.default_rng(0).random((1, 3)).astype(np.float32)
    y = np.random.default_rng(1).random((1, 3, 3)).astype(np.float32)
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    own = tape.gradient(loss, model.trainable_weights)
    local_layers = [layer for layer in model.layers if layer.trainable_weights][:local_count]
    optimizer = hvd_keras.PartialDistributedOptimizer(keras.optimizers.Adam(),
                                                      sparse_as_dense=True,
                                                      local_layers=local_layers)
    if TF_KERAS:
        pairs = optimizer._compute_gradients(loss, model.trainable_weights, tape=tape)
        reduced = [g for g, _ in pairs]
    else:
        reduced = optimizer._kolo_gradients(own, model.trainable_weights)
    local = {id(v) for layer in local_layers for v in layer.trainable_weights}
    for variable, mine, got in zip(model.trainable_weights, own, reduced):
        if id(variable) in local:
            assert np.allclose(mine.numpy(), SIZE * got.numpy())  # scaled, not reduced
        else:
            assert same_on_every_rank([got.numpy()])
            assert not same_on_every_rank([mine.numpy()])


def test_partial_distributed_optimizer_refuses_what_horovod_refuses():
    with pytest.raises(ValueError, match="Average and Sum"):
        hvd_keras.PartialDistributedOptimizer(keras.optimizers.SGD(), op=hvd_keras.Adasum)
    with pytest.raises(ValueError, match="tf.keras.layers.Layer"):
        hvd_keras.PartialDistributedOptimizer(keras.optimizers.SGD(), local_layers=["dense"])


@multi_rank
def test_broadcast_callback_leaves_local_variables_alone():
    root = SIZE - 1
    init = keras.initializers.Constant(float(RANK))
    model = keras.Sequential([keras.Input(shape=(3,))] + [
        keras.layers.Dense(3, kernel_initializer=init, bias_initializer=init, trainable=False)
        for _ in range(3)])
    model.compile(loss="mse")
    local = list(model.layers[0].weights)
    model.fit(np.ones((1, 3)), np.ones((1, 3)), verbose=0, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank=root, local_variables=local)])
    local_ids = {id(v) for v in local}
    for variable in model.weights:
        want = float(RANK) if id(variable) in local_ids else float(root)
        assert np.all(variable.numpy() == want), variable.name


def test_lr_warmup_and_schedules_over_twenty_epochs():
    initial_lr = 0.1 * SIZE
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(2)])
    model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam()))
    seen = []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(float(self.model.optimizer.learning_rate.numpy()))
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=initial_lr, warmup_epochs=5),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=1e-1,
                                                   start_epoch=5, end_epoch=10),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial_lr, multiplier=1e-2,
                                                   start_epoch=10, end_epoch=15),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=initial_lr,
                                                   multiplier=lambda epoch: epoch,
                                                   start_epoch=15, end_epoch=20),
        Record()]
    rng = np.random.default_rng(RANK)
    history = model.fit(rng.random((10, 3)), rng.random((10, 2)), steps_per_epoch=5,
                        epochs=20, callbacks=callbacks, verbose=0)
    for epoch, lr in enumerate(seen):
        if epoch < 5:
            assert lr <= initial_lr * (1 + 1e-6)
        elif 5 <= epoch < 10:  # a number multiplier: multiplier ** (epoch - start_epoch)
            assert np.isclose(lr, initial_lr * 1e-1 ** (epoch - 5))
        elif 10 <= epoch < 15:
            assert np.isclose(lr, initial_lr * 1e-2 ** (epoch - 10))
        elif epoch >= 15:
            assert np.isclose(lr, initial_lr * epoch)
    assert same_on_every_rank([history.history["loss"]])


def test_elastic_keras_state_syncs_restores_and_commits():
    value = 1.0 if RANK == 0 else 2.0
    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(2)])
    model.set_weights([np.full((2, 2), value, np.float32), np.full((2,), value, np.float32)])
    other = [np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), np.zeros(2, np.float32)]
    state = hvd.elastic.KerasState(model, keras.optimizers.Adam(0.001), batch=20 + RANK,
                                   epoch=10 + RANK)
    state.sync()
    assert all(np.all(w == 1.0) for w in model.get_weights())
    assert (state.batch, state.epoch) == (20, 10)
    synced = model.get_weights()
    model.set_weights(other)
    state.batch, state.epoch = 21, 11
    state.restore()
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), synced))
    assert (state.batch, state.epoch) == (20, 10)
    model.set_weights(other)
    state.batch, state.epoch = 21, 11
    state.commit()
    state.restore()
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), other))
    assert (state.batch, state.epoch) == (21, 11)
