"""Allreduce (sum) of a float32 tensor from TensorFlow, in kolo-bench's columns; with --hvd
also allgather and broadcast (--op).

    kolorun -np 2 python allreduce_bench.py --hvd kolo.tensorflow            # eager calls
    kolorun -np 2 python allreduce_bench.py --hvd kolo.tensorflow --function  # in a tf.function
    kolorun -np 2 python allreduce_bench.py --hvd kolo.tensorflow --op allgather
    python allreduce_bench.py --mwms       # one process per worker, TF_CONFIG set by the caller

Every iteration makes the input untimed (rank r's holds r+1), with --barrier 1 waits for the
other ranks (untimed), times one allreduce that returns the reduced tensor (kolo's op eagerly
or in a tf.function; MultiWorkerMirroredStrategy's all_reduce of its replica context in
strategy.run), and checks the result untimed (#wrong counts the iterations whose result is not
n(n+1)/2 everywhere). Sizes go from -b to -e by the factor -f. Rank 0 prints, per size: bytes,
count, type, redop, the median (or mean) over -n timed iterations (after -w warmup) of the
slowest rank's time, algbw, busbw = algbw*2(n-1)/n and #wrong. Exits non-zero if any result was
wrong. Ops are named per size, so kolo's negotiation cache is used, as for gradients.

--op allgather: rank r contributes SIZE/4/n elements holding r+1 and every rank checks the
gathered SIZE bytes (kolo-bench -o allgather counts the size the same way); busbw =
algbw*(n-1)/n. --op broadcast: SIZE bytes from rank 0 (rank r's holds r+1, the result must be
1 everywhere); busbw = algbw.
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import busy_load  # noqa: E402  (tools/bench/busy_load.py)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--hvd", choices=["kolo.tensorflow", "horovod.tensorflow"],
                       help="the Horovod-style module to import")
    which.add_argument("--mwms", action="store_true",
                       help="tf.distribute.MultiWorkerMirroredStrategy (TF_CONFIG from the caller)")
    parser.add_argument("--function", action="store_true",
                        help="with --hvd: run each op inside a tf.function")
    parser.add_argument("--op", choices=["allreduce", "allgather", "broadcast"],
                        default="allreduce", help="the collective (allgather, broadcast: --hvd)")
    parser.add_argument("-b", default="4K", help="smallest size in bytes (4K, 1M)")
    parser.add_argument("-e", default="64M", help="largest size in bytes")
    parser.add_argument("-f", type=int, default=4, help="size step factor")
    parser.add_argument("-n", type=int, default=20, help="timed iterations per size")
    parser.add_argument("-w", type=int, default=3, help="warmup iterations per size")
    parser.add_argument("--stat", choices=["mean", "median"], default="median")
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow's intra-op threads")
    parser.add_argument("--barrier", type=int, choices=[0, 1], default=0,
                        help="1: an untimed barrier before every timed op")
    busy_load.add_argument(parser)
    return parser.parse_args(argv)


class Hvd:
    """kolo.tensorflow or horovod.tensorflow: the same calls on either."""

    def __init__(self, module_name, in_function):
        import importlib
        self.name = module_name + (" (tf.function)" if in_function else " (eager)")
        self.hvd = importlib.import_module(module_name)
        self.hvd.init()
        self.functions = {}
        self.in_function = in_function

    def rank(self):
        return self.hvd.rank()

    def size(self):
        return self.hvd.size()

    def allreduce(self, tensor, name):
        return self._call(lambda t: self.hvd.allreduce(t, op=self.hvd.Sum, name=name), tensor,
                          name)

    def allgather(self, tensor, name):
        return self._call(lambda t: self.hvd.allgather(t, name=name), tensor, name)

    def broadcast(self, tensor, name):
        return self._call(lambda t: self.hvd.broadcast(t, root_rank=0, name=name), tensor, name)

    def _call(self, op, tensor, name):
        if not self.in_function:
            return op(tensor)
        if name not in self.functions:
            self.functions[name] = tf.function(op)
        return self.functions[name](tensor)

    def barrier(self):
        self.hvd.allreduce(tf.zeros([1]), op=self.hvd.Sum, name="bench.barrier")

    def gather_rows(self, row, name):
        return self.hvd.allgather(tf.constant(row[None, :]), name=name).numpy()

    def shutdown(self):
        self.hvd.shutdown()


class Mwms:
    """MultiWorkerMirroredStrategy's all_reduce, one replica per worker (TF_CONFIG)."""

    def __init__(self):
        self.name = "MultiWorkerMirroredStrategy"
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy()
        resolver = self.strategy.cluster_resolver
        self._rank = resolver.task_id
        self._size = self.strategy.num_replicas_in_sync
        self.reduce_fn = tf.function(self._reduce)

    def _reduce(self, tensor):
        def replica(t):
            # tf.identity places the value on the replica's device (all_reduce refuses a value
            # with no device: "destinations can not be empty").
            return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM,
                                                                  tf.identity(t))
        return self.strategy.experimental_local_results(self.strategy.run(replica, (tensor,)))[0]

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def allreduce(self, tensor, name):
        return self.reduce_fn(tensor)

    def barrier(self):
        self.reduce_fn(tf.zeros([1]))

    def gather_rows(self, row, name):
        # Each rank's row in its own slot of a zero matrix, summed: every row everywhere.
        matrix = np.zeros([self._size, row.size])
        matrix[self._rank] = row
        return self.reduce_fn(tf.constant(matrix)).numpy()

    def shutdown(self):
        pass


def sizes(low, high, factor):
    size = low
    while size <= high:
        yield size
        size *= factor


def main(argv):
    args = parse_args(argv)
    if args.mwms and args.op != "allreduce":
        print("allreduce_bench: --op %s needs --hvd" % args.op, file=sys.stderr)
        return 2
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    lib = Mwms() if args.mwms else Hvd(args.hvd, args.function)
    rank, ranks = lib.rank(), lib.size()
    what = {"allreduce": "sum of float32", "allgather": "allgather of float32",
            "broadcast": "broadcast of float32 from rank 0"}[args.op]
    if rank == 0:
        print("# %s, %d ranks, pid %d, tensorflow %s, %s, %s of %d iterations after "
              "%d warmup" % (lib.name, ranks, os.getpid(), tf.__version__, what, args.stat,
                             args.n, args.w))
        print("# %10s %12s %6s %6s %10s %8s %8s %6s" % ("size", "count", "type", "redop",
                                                       "time(us)", "algbw", "busbw", "#wrong"))
        sys.stdout.flush()
    wrong_total = 0
    rows = []
    with busy_load.busy(args.busy):
        for size in sizes(parse_size(args.b), parse_size(args.e), args.f):
            count = size // 4
            name = "bench.%s.%d" % (args.op, size)
            part = count // ranks  # allgather: the elements a rank contributes
            if args.op == "allreduce":
                call, shape = lib.allreduce, [count]
                expected = tf.fill([count], float(ranks * (ranks + 1) / 2))
            elif args.op == "allgather":
                call, shape = lib.allgather, [part]
                expected = tf.repeat(tf.range(1, ranks + 1, dtype=tf.float32), part)
            else:
                call, shape = lib.broadcast, [count]
                expected = tf.ones([count])
            times, wrong = [], 0
            lib.barrier()
            for iteration in range(args.w + args.n):
                tensor = tf.fill(shape, float(rank + 1))
                if args.barrier:
                    lib.barrier()
                start = time.perf_counter()
                result = call(tensor, name)
                elapsed = time.perf_counter() - start
                if result.shape != expected.shape or not bool(tf.reduce_all(tf.equal(result,
                                                                                     expected))):
                    wrong += 1
                if iteration >= args.w:
                    times.append(elapsed)
            per_rank = lib.gather_rows(np.array(times, dtype=np.float64), name + ".times")
            times = np.max(per_rank, axis=0).tolist()
            seconds = statistics.median(times) if args.stat == "median" else statistics.mean(times)
            algbw = size / seconds / 1e9
            busbw = algbw * {"allreduce": 2 * (ranks - 1) / ranks, "allgather": (ranks - 1) / ranks,
                             "broadcast": 1}[args.op]
            wrong_total += wrong
            rows.append({"size": size, "us": seconds * 1e6, "wrong": wrong})
            if rank == 0:
                redop = "sum" if args.op == "allreduce" else "none"
                print("  %10d %12d %6s %6s %10.1f %8.2f %8.2f %6d" % (size, count, "float", redop,
                                                                       seconds * 1e6, algbw, busbw,
                                                                       wrong))
                sys.stdout.flush()
    lib.barrier()
    if rank == 0:
        print("# json " + json.dumps({"bench": args.op, "lib": lib.name, "ranks": ranks,
                                      "rows": rows}))
    lib.shutdown()
    if wrong_total:
        print("rank %d: %d wrong results" % (rank, wrong_total), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
