"""Elastic Keras model.fit on the 8x8 digits with Horovod's elastic Keras API (hvd.elastic): the
job keeps training when a rank is lost and grows when a host joins. The import below is the
only line that differs from a horovod.tensorflow.keras script. Launch it with kolorun's elastic
mode (docs/ELASTIC.md); the discovery script prints the hosts ("host:slots" lines):

    printf 'localhost:1\\n127.0.0.2:1\\n127.0.0.3:1\\n' > /tmp/hosts.txt
    PYTHONPATH=build/python build/bin/kolorun -np 3 --min-np 2 --max-np 3 \\
        --host-discovery-script 'cat /tmp/hosts.txt' \\
        .venv/tensorflow/bin/python examples/tensorflow/elastic_keras.py --batch-ms 50

then kill -9 a worker's pid (each prints it) and watch the others go on. Outside kolorun's
elastic mode the same script runs as a fixed-size job. Works on Keras 3 and on tf-keras
(TF_USE_LEGACY_KERAS=1).

The state (model, optimizer, epoch, batch) is committed every --commit-every batches and at
every epoch's end by hvd.elastic.CommitStateCallback; after a reset each rank trains on its share
of the data for the new number of ranks, from the committed epoch. Lines:
  "start rank R of S pid P time T"     at every (re)start of the training function
  "training rank R of S pid P time T"  after its first batch there
  "epoch E rank R of S loss L"         (every rank) at each epoch's end
  "done rank R of S epochs E checksum C"  (every rank) at the end: C is a hash of the weights,
                                       the same on every rank
"""

import argparse
import hashlib
import os
import time

import numpy as np
import tensorflow as tf

import kolo.tensorflow.keras as hvd  # with Horovod: import horovod.tensorflow.keras as hvd

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv")


def load_digits(path, samples):
    data = np.loadtxt(path, delimiter=",", dtype=np.float32)
    data = data[:samples] if samples else data
    return data[:, :64] / 16.0, data[:, 64].astype(np.int64)


def say(text):
    print(text, flush=True)


def checksum(model):
    return hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()[:16]


class Progress(tf.keras.callbacks.Callback):
    """Prints the lines a test reads, and slows each batch by --batch-ms (so that one can act
    mid-epoch)."""

    def __init__(self, state, batch_ms):
        super().__init__()
        self.state = state
        self.batch_ms = batch_ms
        self.first = True

    def on_train_begin(self, logs=None):
        self.first = True  # every fit, the first after a reset too

    def on_train_batch_end(self, batch, logs=None):
        if self.batch_ms:
            time.sleep(self.batch_ms / 1000.0)
        if self.first:
            say("training rank %d of %d pid %d time %.3f"
                % (hvd.rank(), hvd.size(), os.getpid(), time.time()))
            self.first = False

    def on_epoch_end(self, epoch, logs=None):
        # UpdateEpochStateCallback ran first: state.epoch counts the epochs done over resets.
        say("epoch %d rank %d of %d loss %.4f"
            % (self.state.epoch - 1, hvd.rank(), hvd.size(), logs["loss"]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16, help="per rank")
    parser.add_argument("--samples", type=int, default=0, help="the first N samples (0: all)")
    parser.add_argument("--commit-every", type=int, default=4, help="batches")
    parser.add_argument("--batch-ms", type=float, default=0, help="extra time per batch")
    parser.add_argument("--lr", type=float, default=0.05, help="scaled by the number of ranks")
    parser.add_argument("--data", default=DATA)
    args = parser.parse_args()

    hvd.init()  # in an elastic job: waits for the driver to place this worker in a generation
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(1234)
    features, labels = load_digits(args.data, args.samples)

    model = tf.keras.Sequential([
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    optimizer = tf.keras.optimizers.SGD(learning_rate=args.lr * hvd.size(), momentum=0.9)
    model.compile(optimizer=hvd.DistributedOptimizer(optimizer),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    def scale_lr():  # after every reset: the learning rate follows the number of ranks
        model.optimizer.learning_rate = args.lr * hvd.size()
    state.register_reset_callbacks([scale_lr])

    callbacks = [
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.CommitStateCallback(state, batches_per_commit=args.commit_every),
        Progress(state, args.batch_ms),
    ]

    @hvd.elastic.run
    def train(state):
        say("start rank %d of %d pid %d time %.3f"
            % (hvd.rank(), hvd.size(), os.getpid(), time.time()))
        # This rank's share for the current number of ranks, the same number of batches on
        # every rank.
        steps = len(labels) // hvd.size() // args.batch_size
        shard = np.arange(len(labels))[hvd.rank()::hvd.size()][:steps * args.batch_size]
        # Horovod's example: epochs counts what is left (UpdateEpochStateCallback adds Keras's
        # epoch number to the state's epoch at the start of this fit).
        state.model.fit(features[shard], labels[shard], batch_size=args.batch_size,
                        epochs=args.epochs - state.epoch, shuffle=False, callbacks=callbacks,
                        verbose=0)

    train(state)
    say("done rank %d of %d epochs %d checksum %s"
        % (hvd.rank(), hvd.size(), state.epoch, checksum(model)))
    hvd.shutdown()


if __name__ == "__main__":
    main()
