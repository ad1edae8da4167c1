"""A synthetic Keras training step (model.fit on random images) timed on one of three setups:

    kolorun -np 2 python train_bench.py --mode kolo      # kolo.tensorflow.keras.DistributedOptimizer
    python train_bench.py --mode mwms                    # MultiWorkerMirroredStrategy, TF_CONFIG
    kolorun -np 2 python train_bench.py --mode none      # the same step, no communication

--keras 2 runs tf-keras (TF_USE_LEGACY_KERAS=1; MultiWorkerMirroredStrategy's model.fit works
only there), --keras 3 Keras 3 (TensorFlow's default). Every rank trains --batch images a step
with --threads compute threads (intra-op), --warmup untimed steps then --steps timed ones; rank
0 prints the median and the spread of the step time (from Keras's batch callbacks) and checks
after training that the ranks' trainable weights agree (kolo and MWMS) or says they were not
compared (none). Exits non-zero when they differ.
"""

import argparse
import hashlib
import json
import os
import statistics
import sys
import time


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["kolo", "mwms", "none"], required=True)
    parser.add_argument("--keras", choices=["2", "3"], default="3")
    parser.add_argument("--model", choices=["resnet50", "mlp"], default="resnet50")
    parser.add_argument("--batch", type=int, default=8, help="images per rank and step")
    parser.add_argument("--image", type=int, default=224, help="image side for resnet50")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow's intra-op threads")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.keras == "2":
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    keras = tf.keras

    hvd = None
    strategy = None
    if args.mode == "kolo":
        import kolo.tensorflow.keras as hvd
        hvd.init()
        rank, ranks = hvd.rank(), hvd.size()
    elif args.mode == "mwms":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        rank, ranks = strategy.cluster_resolver.task_id, strategy.num_replicas_in_sync
    else:
        rank, ranks = int(os.environ.get("KOLO_RANK", 0)), int(os.environ.get("KOLO_SIZE", 1))

    if args.model == "resnet50":
        shape, classes = (args.image, args.image, 3), 1000
    else:
        shape, classes = (784,), 10

    def build():
        keras.utils.set_random_seed(42)
        if args.model == "resnet50":
            model = keras.applications.ResNet50(weights=None, input_shape=shape, classes=classes)
        else:
            model = keras.Sequential([keras.Input(shape=shape),
                                      keras.layers.Dense(1024, activation="relu"),
                                      keras.layers.Dense(1024, activation="relu"),
                                      keras.layers.Dense(classes)])
        optimizer = keras.optimizers.SGD(0.01)
        if hvd is not None:
            optimizer = hvd.DistributedOptimizer(optimizer)
        model.compile(optimizer=optimizer, jit_compile=False,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    if strategy is not None:
        with strategy.scope():
            model = build()
    else:
        model = build()

    rng = np.random.default_rng(rank)
    global_batch = args.batch * (ranks if strategy is not None else 1)
    images = rng.normal(size=(global_batch,) + shape).astype(np.float32)
    labels = rng.integers(0, classes, size=(global_batch,))
    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
    if strategy is not None:
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        dataset = dataset.with_options(options)

    starts, times = {}, []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            starts[batch] = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if batch >= args.warmup:
                times.append(time.perf_counter() - starts[batch])

    callbacks = [Timer()]
    if hvd is not None:
        callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))
    model.fit(dataset, steps_per_epoch=args.warmup + args.steps, epochs=1, verbose=0,
              callbacks=callbacks)

    # Trainable weights only: batch norm's moving statistics follow each rank's own batches (in
    # Horovod too).
    digest = hashlib.sha256(b"".join(np.asarray(w).tobytes()
                                     for w in model.trainable_weights)).hexdigest()[:16]
    same = None
    if hvd is not None:
        codes = hvd.allgather(np.frombuffer(digest.encode(), dtype=np.uint8)[None, :])
        same = all(bytes(row) == digest.encode() for row in np.asarray(codes, dtype=np.uint8))
    elif strategy is not None:
        # Every worker's digest summed as bytes in its own row: each row everywhere.
        rows = np.zeros([ranks, len(digest)], dtype=np.float64)
        rows[rank] = np.frombuffer(digest.encode(), dtype=np.uint8)
        total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(
            lambda: tf.constant(rows)), axis=None).numpy()
        same = all(bytes(row.astype(np.uint8)) == digest.encode() for row in total)
    median = statistics.median(times)
    if rank == 0:
        result = {"bench": "train", "mode": args.mode, "keras": args.keras, "model": args.model,
                  "ranks": ranks, "batch": args.batch, "ms_median": median * 1e3,
                  "ms_min": min(times) * 1e3, "ms_max": max(times) * 1e3,
                  "steps": len(times), "weights_identical": same}
        print("# %s %s keras %s, %d ranks, batch %d: %.1f ms/step median (%.1f-%.1f), weights "
              "identical: %s" % (args.model, args.mode, args.keras, ranks, args.batch,
                                 median * 1e3, min(times) * 1e3, max(times) * 1e3,
                                 "not compared" if same is None else same))
        print("# json " + json.dumps(result))
        sys.stdout.flush()
    if hvd is not None:
        hvd.shutdown()
    return 1 if same is False else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
