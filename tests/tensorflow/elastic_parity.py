"""The differential test of kolo.tensorflow's elastic API against Horovod 0.28.1's
horovod.tensorflow.elastic and horovod.tensorflow.keras.elastic: the same calls on
TensorFlowState, TensorFlowKerasState and KerasState (Keras 3, tf-keras and tf-keras's legacy
optimizers, one process each time), ObjectState and its reset callbacks, run() with errors of
every kind, and the Keras callbacks' effect on state.batch and state.epoch over short fits, in a
one-rank job (init without a launcher), recorded as JSON. --record writes Horovod's, outside CI:

    HVD_TF_PYTHON tests/tensorflow/elastic_parity.py --hvd horovod.tensorflow \\
        --record tests/tensorflow/elastic_expected_horovod.json

(HVD_TF_PYTHON: the venv tools/bench/tensorflow/build_horovod.sh prints); --check compares
kolo's with them and prints one line per difference (ctest's tensorflow_elastic_parity runs it).
"""

import argparse
import importlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python",
                                "elastic"))
from parity_json import finish  # noqa: E402  (with kolo.torch's elastic parity test)

# The differences kolo keeps on purpose (docs/TENSORFLOW.md, "Elastic training"):
# (key regex, what Horovod gave, why kolo differs[, the key whose Horovod answer kolo's must equal
# instead]).
KNOWN = [
    (r"^keras_state\.keras3$", {"raises": "TypeError"},
     "Horovod calls optimizer.variables(), a list in Keras 3's optimizers ('list' object is "
     "not callable); kolo takes it, and must train as Horovod does on tf-keras",
     "keras_state.tf_keras"),
    (r"^run\.unknown_error_not_horovods$", {"returned": None},
     "Horovod's wrapper swallows a TensorFlow UnknownError that does not name a Horovod op "
     "(the training function returns None); kolo's raises it to the caller"),
]


def raised(error):
    return {"raises": type(error).__name__}


def values(variables):
    return [np.round(np.asarray(v.numpy(), dtype=np.float64), 6).reshape(-1).tolist()
            for v in variables]


def tensorflow_state_records(hvd, out):
    a = tf.Variable([1.0, 2.0, 3.0])
    b = tf.Variable([[1, 2], [3, 4]], dtype=tf.int32)
    state = hvd.elastic.TensorFlowState([a, b], epoch=0, tags=["x"])
    a.assign_add([1.0, 1.0, 1.0])
    state.epoch = 1
    state.restore()
    record = {"restore_before_commit": values([a, b]) + [state.epoch, state.tags]}
    a.assign([5.0, 6.0, 7.0])
    b.assign([[9, 9], [9, 9]])
    state.epoch = 2
    state.commit()
    a.assign([0.0, 0.0, 0.0])
    state.epoch = 3
    state.tags = ["y"]
    state.restore()
    record["restore_after_commit"] = values([a, b]) + [state.epoch, state.tags]
    a.assign([4.0, 4.0, 4.0])
    state.sync()  # one rank: rank 0's values are its own, and they are saved
    a.assign([8.0, 8.0, 8.0])
    state.restore()
    record["restore_after_sync"] = values([a, b]) + [state.epoch]
    out["tensorflow_state"] = record
    try:
        out["tensorflow_state.no_variables"] = len(hvd.elastic.TensorFlowState().variables)
    except Exception as error:  # noqa: BLE001  (recorded)
        out["tensorflow_state.no_variables"] = raised(error)


def keras_model(keras):
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(2)])
    model.set_weights([np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]], dtype=np.float32),
                       np.array([0.05, -0.05], dtype=np.float32)])
    return model


def sgd_step(keras, model, optimizer, scale):
    x = tf.constant([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]]) * scale
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(model(x) - 1.0))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def keras_state_records(hvd, out):
    """The same training with a KerasState on every kind of optimizer: momentum makes the steps
    after a restore depend on the restored optimizer state."""
    import keras
    import tf_keras
    variants = {"keras3": (keras, lambda: keras.optimizers.SGD(0.1, momentum=0.9)),
                "tf_keras": (tf_keras, lambda: tf_keras.optimizers.SGD(0.1, momentum=0.9)),
                "tf_keras_legacy": (tf_keras,
                                    lambda: tf_keras.optimizers.legacy.SGD(0.1, momentum=0.9))}
    for name, (module, make_optimizer) in variants.items():
        key = "keras_state." + name
        try:
            model, optimizer = keras_model(module), make_optimizer()
            state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0)
            sgd_step(module, model, optimizer, 1.0)
            state.epoch = 1
            state.commit()
            committed = values(model.trainable_variables)
            sgd_step(module, model, optimizer, 2.0)
            sgd_step(module, model, optimizer, 3.0)
            state.epoch = 2
            state.restore()
            record = {"weights_back": values(model.trainable_variables) == committed,
                      "epoch": state.epoch}
            sgd_step(module, model, optimizer, 2.0)
            record["after_restore_step"] = values(model.trainable_variables)
            state.sync()
            sgd_step(module, model, optimizer, 1.5)
            record["after_sync_step"] = values(model.trainable_variables)
            out[key] = record
        except Exception as error:  # noqa: BLE001  (recorded)
            out[key] = raised(error)
    try:
        hvd.elastic.TensorFlowKerasState(keras.Sequential([keras.layers.Dense(2)]))
        out["keras_state.unbuilt_model"] = "made"
    except Exception as error:  # noqa: BLE001
        out["keras_state.unbuilt_model"] = raised(error)


def object_state_records(hvd, out):
    calls = []
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, count=1, items=[1])
    state.count = 5
    state.items.append(2)  # in place: the saved value is the same list
    state.restore()
    calls.append(["restored", state.count, state.items])
    state.count = 7
    state.save()
    state.count = 8
    state.sync()
    calls.append(["synced", state.count])
    state.register_reset_callbacks([lambda: calls.append("cb1"), lambda: calls.append("cb2")])
    state.on_reset()
    out["object_state"] = calls
    state.check_host_updates()  # no elastic driver: nothing happens
    out["object_state.check_without_driver"] = "returned"


def run_records(hvd, errors, out):
    events = []

    class Recorded(hvd.elastic.TensorFlowState):
        def sync(self):
            events.append("sync")
            super().sync()

        def restore(self):
            events.append("restore")
            super().restore()

        def reset(self):
            events.append("reset")

    weight = tf.Variable([0.0])
    state = Recorded([weight], step=0)
    state.register_reset_callbacks([lambda: events.append("callback size %d" % hvd.size())])
    attempts = []

    @hvd.elastic.run
    def train(state, limit):
        attempts.append(state.step)
        while state.step < limit:
            state.step += 1
            weight.assign_add([1.0])
            if state.step == 2:
                state.commit()
            if state.step == 3 and len(attempts) == 1:
                raise errors.HorovodInternalError("injected")
            if state.step == 4 and len(attempts) == 2:
                raise errors.HostsUpdatedInterrupt(False)
            if state.step == 5 and len(attempts) == 3:
                raise errors.HostsUpdatedInterrupt(True)
        return "finished at %d weight %.1f" % (state.step, weight.numpy()[0])

    out["run.result"] = train(state, 6)
    out["run.events"] = events
    out["run.attempts"] = attempts
    out["run.initialized_after"] = hvd.is_initialized()

    # What a script sees from run() when the training function fails otherwise.
    def allgather_scalar():
        return hvd.allgather(tf.constant(1.0))

    failures = {
        "value_error": lambda: (_ for _ in ()).throw(ValueError("not an elastic error")),
        "unknown_error_not_horovods": lambda: (_ for _ in ()).throw(
            tf.errors.UnknownError(None, None, "some other op failed")),
        "allgather_scalar": allgather_scalar,
        "broadcast_bad_root": lambda: hvd.broadcast(tf.ones([2]), root_rank=hvd.size()),
        "allgather_scalar_in_function": tf.function(allgather_scalar, autograph=False),
    }
    for name, failure in failures.items():
        calls = []

        @hvd.elastic.run
        def failing(state):
            calls.append(1)
            failure()
            return "no error"
        try:
            out["run." + name] = {"returned": failing(hvd.elastic.ObjectState(
                hvd.broadcast_object, hvd.rank, x=0))}
        except Exception as error:  # noqa: BLE001
            out["run." + name] = dict(raised(error), calls=len(calls))


def callback_records(hvd, out):
    """The callbacks of hvd.elastic (tf.keras: Keras 3 here) over short fits: what state.batch,
    state.epoch and the commits are at each batch's end."""
    keras_elastic = importlib.import_module(hvd.__name__ + ".keras.elastic")

    class Counted(hvd.elastic.ObjectState):
        commits = 0

        def save(self):
            Counted.commits += 1
            super().save()

    seen = []

    class Record(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(["batch", batch, state.batch, state.epoch, Counted.commits,
                         self.params.get("steps")])

        def on_epoch_end(self, epoch, logs=None):
            seen.append(["epoch", epoch, state.batch, state.epoch, Counted.commits])

    state = Counted(hvd.broadcast_object, hvd.rank, batch=0, epoch=0)
    callbacks = [keras_elastic.UpdateEpochStateCallback(state),
                 keras_elastic.UpdateBatchStateCallback(state),
                 keras_elastic.CommitStateCallback(state, batches_per_commit=2), Record()]
    model = keras_model(tf.keras)
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    x, y = np.ones([12, 3], dtype=np.float32), np.zeros([12, 2], dtype=np.float32)
    model.fit(x, y, batch_size=4, epochs=2, callbacks=callbacks, verbose=0)
    out["callbacks.fit"] = seen[:]
    del seen[:]
    # As after a reset mid-epoch: the state says epoch 2, batch 1; fit with steps_per_epoch.
    state.batch = 1
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4).repeat(), steps_per_epoch=3,
              epochs=3, initial_epoch=state.epoch, callbacks=callbacks, verbose=0)
    out["callbacks.fit_initial_epoch_steps"] = seen[:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hvd", required=True, help="horovod.tensorflow or kolo.tensorflow")
    parser.add_argument("--record")
    parser.add_argument("--check")
    args = parser.parse_args()
    hvd = importlib.import_module(args.hvd)
    importlib.import_module(args.hvd + ".elastic")
    errors = importlib.import_module("horovod.common.exceptions" if args.hvd.startswith("horovod")
                                     else "kolo.common.errors")
    hvd.init()
    out = {}
    tensorflow_state_records(hvd, out)
    keras_state_records(hvd, out)
    object_state_records(hvd, out)
    run_records(hvd, errors, out)
    callback_records(hvd, out)
    hvd.shutdown()
    return finish(out, args.record, args.check, KNOWN)

if __name__ == "__main__":
    sys.exit(main())
