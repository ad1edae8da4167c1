"""The cases kolo.tensorflow is compared with Horovod on: run under a 2-rank launcher with either
module, each rank writes what every case gave (values, shapes, dtypes, or the exception's type)
to OUT.rank<r>.json.

    kolorun -np 2 python horovod_reference.py --hvd kolo.tensorflow --out /tmp/kolo
    horovodrun -np 2 --gloo python horovod_reference.py --hvd horovod.tensorflow --out /tmp/hvd

horovod_expected_2_ranks.json holds Horovod 0.28.1's answers (docs/TENSORFLOW.md, "Testing
against Horovod"); test_horovod_reference.py runs the cases on kolo in CI and compares.
"""

import argparse
import importlib
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def describe(value):
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if isinstance(value, tf.IndexedSlices):
        value = tf.convert_to_tensor(value)
    value = tf.convert_to_tensor(value)
    return {"dtype": value.dtype.name, "shape": value.shape.as_list(),
            "value": np.asarray(value.numpy(), dtype=np.float64).reshape(-1).tolist()}


def weighted_gradient(fn, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        positions = tf.reshape(tf.cast(tf.range(tf.size(y)), y.dtype), tf.shape(y))
        loss = tf.reduce_sum(y * positions)
    return tape.gradient(loss, x)


def cases(hvd):
    """name -> a function of no arguments returning what to record."""
    rank, size = hvd.rank(), hvd.size()
    mine = tf.constant([1.0, 2.0, 3.0]) * (rank + 1) + [0.0, rank, -rank]
    ints = tf.constant([7, -7, 3], dtype=tf.int32) * (rank + 1)
    found = {}
    for op in ("Sum", "Average", "Min", "Max", "Product"):
        found["allreduce_float32_" + op] = (
            lambda op=op: hvd.allreduce(mine, op=getattr(hvd, op)))
    found["allreduce_int32_Sum"] = lambda: hvd.allreduce(ints, op=hvd.Sum)
    found["allreduce_int32_Average"] = lambda: hvd.allreduce(ints, op=hvd.Average)
    found["allreduce_float64_scaled"] = lambda: hvd.allreduce(
        tf.cast(mine, tf.float64), op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    found["allreduce_average_scaled"] = lambda: hvd.allreduce(
        mine, op=hvd.Average, prescale_factor=2.0, postscale_factor=0.25)
    found["allreduce_fp16_compression"] = lambda: hvd.allreduce(
        mine, op=hvd.Sum, compression=hvd.Compression.fp16)
    found["allreduce_indexed_slices"] = lambda: hvd.allreduce(
        tf.IndexedSlices(tf.constant([[1.0, 2.0]]) * (rank + 1), tf.constant([rank]),
                         dense_shape=tf.constant([size, 2])))
    found["grouped_allreduce"] = lambda: hvd.grouped_allreduce(
        [mine, tf.cast(mine, tf.float64) * 2], op=hvd.Sum)
    found["allgather_uneven"] = lambda: hvd.allgather(tf.fill([rank + 1, 2], float(rank)))
    found["broadcast_root_1"] = lambda: hvd.broadcast(mine, root_rank=size - 1)
    found["alltoall_splits"] = lambda: hvd.alltoall(
        tf.reshape(tf.range(6, dtype=tf.float32) + 10 * rank, [3, 2]),
        splits=tf.constant([1, 2]) if rank == 0 else tf.constant([2, 1]))
    found["alltoall_even"] = lambda: hvd.alltoall(tf.range(4) + 10 * rank)
    found["reducescatter_sum_uneven"] = lambda: hvd.reducescatter(
        tf.reshape(tf.range(10, dtype=tf.float32) * (rank + 1), [5, 2]), op=hvd.Sum)
    found["reducescatter_average"] = lambda: hvd.reducescatter(
        tf.reshape(tf.range(8, dtype=tf.float32) * (rank + 1), [4, 2]))
    found["grad_allreduce_sum"] = lambda: weighted_gradient(
        lambda x: hvd.allreduce(x, op=hvd.Sum), mine)
    found["grad_allreduce_average_scaled"] = lambda: weighted_gradient(
        lambda x: hvd.allreduce(x, op=hvd.Average, postscale_factor=2.0), mine)
    found["grad_allgather"] = lambda: weighted_gradient(
        hvd.allgather, tf.ones([rank + 1, 2]) * (rank + 1))
    found["grad_broadcast"] = lambda: weighted_gradient(lambda x: hvd.broadcast(x, 0), mine)
    found["grad_alltoall"] = lambda: weighted_gradient(
        lambda x: hvd.alltoall(x, splits=tf.constant([1, 1]))[0], mine[:2])
    found["grad_reducescatter_sum"] = lambda: weighted_gradient(
        lambda x: hvd.reducescatter(x, op=hvd.Sum), tf.ones([4]) * (rank + 1))
    found["grad_reducescatter_average"] = lambda: weighted_gradient(
        lambda x: hvd.reducescatter(x, op=hvd.Average), tf.ones([4]) * (rank + 1))

    def tape(**kwargs):
        w = tf.Variable([1.0, -1.0])
        with tf.GradientTape() as t:
            loss = tf.reduce_sum(w * w * (rank + 1))
        return hvd.DistributedGradientTape(t, **kwargs).gradient(loss, [w])
    found["tape_average"] = tape
    found["tape_sum"] = lambda: tape(op=hvd.Sum)
    found["tape_predivide"] = lambda: tape(gradient_predivide_factor=2.0)
    found["tape_fp16"] = lambda: tape(compression=hvd.Compression.fp16)
    found["error_mismatched_shapes"] = lambda: hvd.allreduce(
        tf.ones([rank + 1]), name="reference.mismatch", op=hvd.Sum)
    found["error_mismatched_dtypes"] = lambda: hvd.allreduce(
        tf.ones([2], dtype=tf.float32 if rank == 0 else tf.float64), name="reference.dtype",
        op=hvd.Sum)
    found["error_allgather_scalar"] = lambda: hvd.allgather(tf.constant(1.0))
    found["error_broadcast_bad_root"] = lambda: hvd.broadcast(mine, root_rank=size)
    found["error_allgather_mismatched_rank"] = lambda: hvd.allgather(
        tf.ones([2, 2]) if rank == 0 else tf.ones([2]), name="reference.rank")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hvd", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    hvd = importlib.import_module(args.hvd)
    hvd.init()
    results = {}
    for name, fn in sorted(cases(hvd).items()):
        try:
            results[name] = {"result": describe(fn())}
        except Exception as error:  # recorded: the reference includes the exception's type
            results[name] = {"error": type(error).__name__}
    with open("%s.rank%d.json" % (args.out, hvd.rank()), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
