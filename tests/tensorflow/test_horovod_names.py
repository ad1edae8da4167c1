"""The names of horovod.tensorflow, horovod.tensorflow.keras and horovod.keras that kolo lacked
(issue 54 item 4), each with Horovod 0.28.1's signature and behaviour: SyncBatchNormalization,
broadcast_global_variables, BroadcastGlobalVariablesHook, broadcast_object_fn, hvd.util and
hvd._executing_eagerly, kolo.keras's PartialDistributedOptimizer and Adasum, and
BestModelCheckpoint's arguments. TensorFlow 1 graph mode (sessions) is run inside a
tf.Graph().as_default() block, where ops are not eager."""

import inspect
import os

import numpy as np
import pytest
import tensorflow as tf

import kolo.keras as hvd_keras
import kolo.tensorflow as hvd
import kolo.tensorflow.keras as hvd_tf_keras

keras = tf.keras
RANK = hvd.rank()
SIZE = hvd.size()


def test_util_and_executing_eagerly_are_horovods():
    assert hvd.util._executing_eagerly() is True
    assert hvd._executing_eagerly() is True
    with tf.Graph().as_default():
        assert hvd._executing_eagerly() is False

    @tf.function
    def traced():
        return tf.constant(hvd.util._executing_eagerly())
    assert not bool(traced())
    v = tf.Variable(1.0)
    assert hvd.util.refs_to_vars(hvd.util.vars_to_refs([[v]]))[0][0] is v
    calls = []
    cached = hvd.util._cache(lambda x: calls.append(x) or x * 2)
    assert (cached(2), cached(2), len(calls)) == (4, 4, 1)


def test_sync_batch_norm_uses_the_statistics_of_every_ranks_batch():
    with pytest.raises(ValueError, match="fused=True"):
        hvd.SyncBatchNormalization(fused=True)
    with pytest.raises(ValueError, match="fused=True"):
        hvd.SyncBatchNormalization(fused=None)
    layer = hvd.SyncBatchNormalization(momentum=0.5)
    assert layer.name.startswith("sync_batch_normalization")
    rng = np.random.default_rng(RANK)
    mine = (rng.normal(size=(6, 3)) * (RANK + 1) + RANK).astype(np.float32)
    every = hvd.allgather(tf.constant(mine)).numpy()  # the same batch size on every rank
    out = layer(mine, training=True).numpy()
    mean, variance = every.mean(axis=0), every.var(axis=0)
    want = (mine - mean) / np.sqrt(variance + layer.epsilon)
    assert np.allclose(out, want, atol=1e-4)
    assert np.allclose(layer.moving_mean.numpy(), 0.5 * mean, atol=1e-5)
    # Inside a tf.function (model.fit's step) too, and a model trains with it.
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(4),
                              hvd.SyncBatchNormalization(), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer=hvd_tf_keras.DistributedOptimizer(
        keras.optimizers.SGD(0.01)))
    model.fit(mine, mine[:, :1], batch_size=6, epochs=1, verbose=0, callbacks=[
        hvd_tf_keras.callbacks.BroadcastGlobalVariablesCallback(0)])
    gathered = hvd.allgather(tf.constant(
        np.concatenate([w.reshape(-1) for w in model.get_weights()])[None, :])).numpy()
    assert np.allclose(gathered, gathered[0], atol=1e-6)


def test_broadcast_global_variables_in_a_session_and_eagerly():
    with pytest.raises(RuntimeError, match="does not support eager execution"):
        hvd.broadcast_global_variables(0)
    with pytest.raises(RuntimeError, match="does not support eager execution"):
        hvd_tf_keras.broadcast_global_variables(0)
    with tf.Graph().as_default():
        a = tf.compat.v1.Variable([float(RANK), 1.0])
        b = tf.compat.v1.Variable(RANK * 10)
        op = hvd.broadcast_global_variables(SIZE - 1)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(op)
            assert session.run(a).tolist() == [float(SIZE - 1), 1.0]
            assert int(session.run(b)) == (SIZE - 1) * 10


def test_broadcast_global_variables_hook_in_a_monitored_session():
    with tf.Graph().as_default():
        v = tf.compat.v1.Variable([float(RANK)] * 3)
        hook = hvd.BroadcastGlobalVariablesHook(0)
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as session:
            assert session.run(v).tolist() == [0.0] * 3


def test_broadcast_object_fn_in_a_session_and_eagerly():
    with tf.Graph().as_default():
        with tf.compat.v1.Session() as session:
            broadcast = hvd.broadcast_object_fn(root_rank=0, session=session)
            assert broadcast({"rank": RANK}) == {"rank": 0}
            assert broadcast([RANK] * (RANK + 1)) == [0]
    broadcast = hvd.broadcast_object_fn(root_rank=SIZE - 1)
    assert broadcast(("eager", RANK)) == ("eager", SIZE - 1)


def test_keras_names_of_horovod_keras():
    assert hvd_keras.Adasum == hvd.Adasum == 2
    assert hvd_keras.Average == hvd.Average and hvd_keras.Sum == hvd.Sum
    with pytest.raises(ValueError):
        hvd_keras.DistributedOptimizer(keras.optimizers.SGD(), op=hvd_keras.Adasum)
    parameters = list(inspect.signature(hvd_keras.PartialDistributedOptimizer).parameters)
    assert parameters == ["optimizer", "name", "device_dense", "device_sparse", "compression",
                          "sparse_as_dense", "gradient_predivide_factor", "op", "groups",
                          "process_set", "local_layers", "scale_local_gradients"]


def test_best_model_checkpoint_binds_horovods_arguments(tmp_path):
    checkpoint = hvd_tf_keras.callbacks.BestModelCheckpoint("val_acc", 1, False, "max")
    assert (checkpoint.monitor, checkpoint.verbose, checkpoint.save_best_only) == \
        ("val_acc", 1, True)
    assert checkpoint.filepath is None  # Horovod's: set later (its Spark estimator does)
    keras_one = hvd_keras.callbacks.BestModelCheckpoint("val_acc", 0, "max")  # no weights arg
    assert keras_one.monitor == "val_acc" and keras_one.filepath is None
    assert getattr(keras_one, "mode", None) == "max" or keras_one.monitor_op is np.greater
    assert not keras_one.save_weights_only
    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="sgd")
    x, y = np.ones((4, 2), np.float32), np.ones((4, 1), np.float32)
    with pytest.raises(ValueError, match="no filepath"):
        model.fit(x, y, validation_data=(x, y), epochs=1, verbose=0,
                  callbacks=[hvd_tf_keras.callbacks.BestModelCheckpoint()])
    path = str(tmp_path / ("best_%d.keras" % RANK))
    model.fit(x, y, validation_data=(x, y), epochs=1, verbose=0,
              callbacks=[hvd_tf_keras.callbacks.BestModelCheckpoint(filepath=path)])
    assert os.path.exists(path)
