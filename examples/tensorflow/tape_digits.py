"""Data-parallel training on the 8x8 digits (examples/data/digits.csv) with a custom
tf.function step and DistributedGradientTape, written for Horovod's TensorFlow API: the import
below is the only line that differs from a horovod.tensorflow script. Run on 4 ranks:

    PYTHONPATH=build/python build/bin/kolorun -np 4 .venv/tensorflow/bin/python \\
        examples/tensorflow/tape_digits.py

Each rank trains on its own quarter of the training set; every rank ends with the same weights,
which the last line checks (one line per rank, identical on all).
"""

import argparse
import hashlib
import os

import numpy as np
import tensorflow as tf

import kolo.tensorflow as hvd  # with Horovod: import horovod.tensorflow as hvd

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
    shard = train[hvd.rank()::hvd.size()]
    steps = len(shard) // args.batch_size

    model = tf.keras.Sequential([
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    optimizer = tf.keras.optimizers.SGD(learning_rate=args.lr * hvd.size(), momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y, first_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        # Horovod's recipe: after the first step (which creates the optimizer's variables),
        # every rank takes rank 0's model and optimizer state.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables, root_rank=0)
        return loss

    for epoch in range(args.epochs):
        permutation = np.random.default_rng(epoch).permutation(shard)
        total = 0.0
        for step in range(steps):
            batch = permutation[step * args.batch_size:(step + 1) * args.batch_size]
            total += float(train_step(features[batch], labels[batch],
                                      tf.constant(epoch == 0 and step == 0)))
        mean_loss = float(hvd.allreduce(tf.constant(total / steps), name="loss"))
        if hvd.rank() == 0 and (epoch % 5 == 4 or epoch == args.epochs - 1):
            print("epoch %d: loss %.4f" % (epoch + 1, mean_loss), flush=True)

    accuracy = float(np.mean(np.argmax(model(features[test]).numpy(), axis=1) == labels[test]))
    digest = hashlib.sha256(b"".join(v.numpy().tobytes()
                                     for v in model.trainable_variables)).hexdigest()[:16]
    everyone = hvd.allgather_object(digest)
    same = all(d == digest for d in everyone)
    print("final: accuracy=%.4f weights_sha256=%s identical_on_all_%d_ranks=%s"
          % (accuracy, digest, hvd.size(), same), flush=True)
    hvd.shutdown()
    if not same:
        raise SystemExit("weights differ between ranks")


if __name__ == "__main__":
    main()
