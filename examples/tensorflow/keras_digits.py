"""Data-parallel Keras model.fit on the 8x8 digits (examples/data/digits.csv), written for
Horovod's Keras API: the import below is the only line that differs from a
horovod.tensorflow.keras script. Works on Keras 3 (TensorFlow's default) and on tf-keras
(TF_USE_LEGACY_KERAS=1). Run on 4 ranks (after tools/install-deps.sh --tensorflow and the build):

    PYTHONPATH=build/python build/bin/kolorun -np 4 .venv/tensorflow/bin/python \\
        examples/tensorflow/keras_digits.py

Each rank trains on its own quarter of the training set; every rank ends with the same weights,
which the last line checks (one line per rank, identical on all).
"""

import argparse
import hashlib
import os

import numpy as np
import tensorflow as tf

import kolo.tensorflow.keras as hvd  # with Horovod: import horovod.tensorflow.keras as hvd

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv")


def load_digits(path):
    data = np.loadtxt(path, delimiter=",", dtype=np.float32)
    return data[:, :64] / 16.0, data[:, 64].astype(np.int64)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05, help="scaled by the number of ranks")
    parser.add_argument("--data", default=DATA)
    args = parser.parse_args()

    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(1234 + hvd.rank())  # different: the broadcast fixes it

    features, labels = load_digits(args.data)
    order = np.random.default_rng(7).permutation(len(labels))
    test, train = order[:297], order[297:]
    shard = train[hvd.rank()::hvd.size()]  # this rank's part of the training set
    steps = len(shard) // args.batch_size
    shard = shard[:steps * args.batch_size]  # the same number of steps on every rank

    model = tf.keras.Sequential([
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    optimizer = tf.keras.optimizers.SGD(learning_rate=args.lr * hvd.size(), momentum=0.9)
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=args.lr * hvd.size(),
                                                 warmup_epochs=min(3, args.epochs)),
    ]
    model.fit(features[shard], labels[shard], batch_size=args.batch_size, epochs=args.epochs,
              shuffle=True, callbacks=callbacks, verbose=2 if hvd.rank() == 0 else 0)

    logits = model.predict(features[test], verbose=0)
    accuracy = float(np.mean(np.argmax(logits, axis=1) == labels[test]))
    digest = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()[:16]
    everyone = hvd.allgather(np.frombuffer(digest.encode(), dtype=np.uint8)[None, :])
    same = all(bytes(row).decode() == digest for row in np.asarray(everyone, dtype=np.uint8))
    print("final: accuracy=%.4f weights_sha256=%s identical_on_all_%d_ranks=%s"
          % (accuracy, digest, hvd.size(), same), flush=True)
    hvd.shutdown()
    if not same:
        raise SystemExit("weights differ between ranks")


if __name__ == "__main__":
    main()
