"""kolo.tensorflow.keras on the Keras this process has (Keras 3, or tf-keras when ctest sets
TF_USE_LEGACY_KERAS=1): DistributedOptimizer in model.fit and in a custom step, local gradient
aggregation, and the callbacks."""

import os

import numpy as np
import pytest
import tensorflow as tf

import kolo.keras as kolo_keras
import kolo.tensorflow as hvd_tf
import kolo.tensorflow.keras as hvd

keras = tf.keras
RANK = hvd.rank()
SIZE = hvd.size()


def rank_data(samples=32, seed=None):
    rng = np.random.default_rng(RANK if seed is None else seed)
    x = rng.normal(size=(samples, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32))[:, None]
    return x, y


def small_model(seed):
    keras.utils.set_random_seed(seed)  # a different start per rank: broadcast must fix it
    return keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(8, activation="tanh"),
                             keras.layers.Dense(1)])


def all_ranks_equal(arrays):
    flat = np.concatenate([a.reshape(-1).astype(np.float64) for a in arrays])
    gathered = hvd_tf.allgather(tf.constant(flat[None, :])).numpy()
    return all(np.array_equal(gathered[0], row) for row in gathered)


def test_the_suite_runs_on_the_keras_it_was_asked_for():
    legacy = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
    assert keras.__name__.startswith("tf_keras") == legacy, keras.__name__


def test_kolo_keras_is_kolo_tensorflow_keras():
    assert kolo_keras.DistributedOptimizer is hvd.DistributedOptimizer
    assert kolo_keras.callbacks.MetricAverageCallback is hvd.callbacks.MetricAverageCallback


def test_model_fit_ends_with_identical_weights():
    model = small_model(seed=RANK)
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.05 * SIZE, momentum=0.9))
    assert type(optimizer).__name__ == "SGD"  # saved models load without kolo
    model.compile(optimizer=optimizer, loss="mse")
    x, y = rank_data()
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback()])
    assert all_ranks_equal(model.get_weights())
    losses = hvd_tf.allgather(tf.constant([history.history["loss"][-1]])).numpy()
    assert np.all(losses == losses[0])  # averaged over the ranks


def test_distributed_optimizer_averages_gradients_in_a_custom_step():
    variable = tf.Variable([1.0, 1.0])
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0))
    grads = [tf.constant([1.0, 2.0]) * (RANK + 1)]

    @tf.function
    def step():
        optimizer.apply_gradients(zip(grads, [variable]))
    step()
    mean = (SIZE + 1) / 2
    np.testing.assert_allclose(variable.numpy(), [1.0 - mean, 1.0 - 2 * mean])


@pytest.mark.parametrize("average", [False, True])
def test_backward_passes_per_step_aggregates_locally(average):
    variable = tf.Variable([0.0])
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), backward_passes_per_step=2,
                                         average_aggregated_gradients=average, op=hvd.Sum)

    @tf.function
    def step(g):
        optimizer.apply_gradients([(g, variable)])
    step(tf.constant([1.0]) * (RANK + 1))
    assert variable.numpy()[0] == 0.0  # the first pass only accumulates
    assert int(optimizer.iterations.numpy()) == 1
    step(tf.constant([2.0]) * (RANK + 1))
    total = 3.0 * SIZE * (SIZE + 1) / 2  # (1 + 2) summed over the ranks
    np.testing.assert_allclose(variable.numpy(), [-(total / 2 if average else total)])
    assert int(optimizer.iterations.numpy()) == 2
    step(tf.constant([1.0]))  # a fresh aggregation: nothing applied yet
    np.testing.assert_allclose(variable.numpy(), [-(total / 2 if average else total)])


def test_distributed_optimizer_refuses_what_horovod_refuses():
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd_tf.Max)
    with pytest.raises(ValueError):
        hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd_tf.Sum,
                                 gradient_predivide_factor=2.0)


def test_learning_rate_warmup_and_schedule():
    model = small_model(seed=0)
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1))
    model.compile(optimizer=optimizer, loss="mse")
    x, y = rank_data(samples=16)
    rates = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            rates.append(float(self.model.optimizer.learning_rate.numpy()))
    warmup = hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.1, warmup_epochs=2,
                                                      steps_per_epoch=2)
    model.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[warmup, Record()])
    # Horovod's formula, batch by batch: lr / size * (epoch * (size - 1) / warmup + 1).
    expected = [0.1 / SIZE * ((e + b / 2 + 1 / 2) * (SIZE - 1) / 2 + 1)
                for e in range(2) for b in range(2)]
    np.testing.assert_allclose(rates[:4], expected, rtol=1e-5)
    schedule = hvd.callbacks.LearningRateScheduleCallback(initial_lr=0.1, multiplier=0.5,
                                                          start_epoch=1)
    rates.clear()
    model.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[schedule, Record()])
    np.testing.assert_allclose(rates[2:], [0.1, 0.1, 0.05, 0.05], rtol=1e-6)


def test_keras_value_helpers():
    assert hvd.allreduce(float(RANK), op=hvd_tf.Sum) == SIZE * (SIZE - 1) / 2
    assert hvd.broadcast(np.array([RANK]), root_rank=0).tolist() == [0]
    assert hvd.allgather(np.array([RANK])).tolist() == list(range(SIZE))
