"""In-place allreduce (sum) of a float32 CPU tensor from Python, in kolo-bench's columns.

One script for three libraries, so that they are timed the same way:

    kolorun -np 2 python allreduce_bench.py --hvd kolo.torch
    horovodrun -np 2 -H localhost:2 --gloo python allreduce_bench.py --hvd horovod.torch
    torchrun --nproc_per_node 2 allreduce_bench.py --ddp        # torch.distributed, gloo
    kolorun -np 2 python allreduce_bench.py --ddp --backend kolo  # torch.distributed on kolo
    kolorun -np 3 python allreduce_bench.py --ddp --backend kolo --group 2  # a sub-group

Every iteration fills the tensor untimed (rank r writes r+1), with --barrier 1 waits for the
other ranks (untimed), times one in-place sum (the library's allreduce_ / dist.all_reduce,
which returns when the result is there), and checks the result untimed (#wrong counts the
iterations whose result is not n(n+1)/2 everywhere). Sizes go from -b to -e by the factor -f.
Rank 0 prints, per size: bytes, count, type, redop, the mean or median (--stat) over -n timed
iterations (after -w warmup ones) of the slowest rank's time, algbw = bytes/time and busbw =
algbw*2(n-1)/n (nccl-tests' definition), and #wrong. Exits non-zero if any result was wrong.
Ops are named per size (as DistributedOptimizer names gradients), so libraries that cache
negotiations by name may use their caches. --group N runs the sweep among ranks 0 .. N-1 only:
a sub-group (dist.new_group) with --ddp, a process set (add_process_set) with --hvd; the other
ranks wait in a barrier of the whole job, and n above is N. --busy N runs N busy processes
beside the ranks for the sweep (tools/bench/busy_load.py).
"""

import argparse
import importlib
import os
import statistics
import sys
import time

import torch

from sweep_sizes import parse_size, sizes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import busy_load  # noqa: E402  (tools/bench/busy_load.py)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--hvd", choices=["kolo.torch", "horovod.torch"],
                       help="the Horovod-style module to import")
    which.add_argument("--ddp", action="store_true",
                       help="torch.distributed's dist.all_reduce (run under torchrun or kolorun)")
    parser.add_argument("--backend", choices=["gloo", "kolo"], default="gloo",
                        help="--ddp's backend (kolo: kolo.torch.distributed's)")
    parser.add_argument("-b", default="4K", help="smallest size in bytes (4K, 1M)")
    parser.add_argument("-e", default="64M", help="largest size in bytes")
    parser.add_argument("-f", type=int, default=4, help="size step factor")
    parser.add_argument("-n", type=int, default=20, help="timed iterations per size")
    parser.add_argument("-w", type=int, default=3, help="warmup iterations per size")
    parser.add_argument("--stat", choices=["mean", "median"], default="median")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--barrier", type=int, choices=[0, 1], default=0,
                        help="1: an untimed barrier before every timed op, so that the ranks "
                        "start it together (as kolo-bench --barrier 1 and the MPI benchmarks)")
    parser.add_argument("--group", type=int, default=0,
                        help="N: the sweep in a sub-group / process set of ranks 0 .. N-1")
    busy_load.add_argument(parser)
    return parser.parse_args(argv)


class Hvd:
    """kolo.torch or horovod.torch: the same calls on either."""

    def __init__(self, module_name, group):
        self.name = module_name
        self.hvd = importlib.import_module(module_name)
        self.hvd.init()
        self.group_size = group or self.hvd.size()
        self.set = (self.hvd.add_process_set(list(range(group))) if group
                    else self.hvd.global_process_set)
        if group:
            self.name += " (process set of %d of %d ranks)" % (group, self.hvd.size())

    def rank(self):
        return self.hvd.rank()

    def size(self):
        return self.group_size

    def allreduce_(self, tensor, name):
        self.hvd.allreduce_(tensor, op=self.hvd.Sum, name=name, process_set=self.set)

    def barrier(self):
        self.hvd.allreduce(torch.zeros(1), name="bench.barrier", process_set=self.set)

    def job_barrier(self):
        self.hvd.allreduce(torch.zeros(1), name="bench.done")

    def gather_rows(self, row, name):
        return self.hvd.allgather(row.unsqueeze(0), name=name, process_set=self.set)

    def shutdown(self):
        self.hvd.shutdown()


class Ddp:
    """torch.distributed with gloo or kolo; the launcher's environment (torchrun's variables,
    which kolorun sets too) gives the rank and the size."""

    def __init__(self, backend, group):
        import torch.distributed as dist
        if backend == "kolo":
            import kolo.torch.distributed  # noqa: F401  (registers the backend)
        self.dist = dist
        self.name = "torch.distributed(%s)" % backend
        dist.init_process_group(backend)
        # new_group is collective over every rank, members or not.
        self.group = dist.new_group(list(range(group))) if group else None
        if group:
            self.name += " (sub-group of %d of %d ranks)" % (group, dist.get_world_size())

    def rank(self):
        return self.dist.get_rank()

    def size(self):
        return self.dist.get_world_size(self.group)

    def allreduce_(self, tensor, name):
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.SUM, group=self.group)

    def barrier(self):
        self.dist.barrier(group=self.group)

    def job_barrier(self):
        self.dist.barrier()

    def gather_rows(self, row, name):
        rows = [torch.empty_like(row) for _ in range(self.size())]
        self.dist.all_gather(rows, row, group=self.group)
        return torch.stack(rows)

    def shutdown(self):
        self.dist.destroy_process_group()


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    lib = Ddp(args.backend, args.group) if args.ddp else Hvd(args.hvd, args.group)
    rank, ranks = lib.rank(), lib.size()
    if args.group and rank >= args.group:  # outside the group: wait for its members
        lib.job_barrier()
        lib.shutdown()
        return 0
    expected = ranks * (ranks + 1) / 2
    if rank == 0:
        print("# %s, %d ranks, pid %d, torch %s, in-place sum of float32, %s of %d iterations"
              " after %d warmup" % (lib.name, ranks, os.getpid(), torch.__version__, args.stat,
                                    args.n, args.w))
        print("# %10s %12s %6s %6s %10s %8s %8s %6s" % ("size", "count", "type", "redop",
                                                       "time(us)", "algbw", "busbw",
                                                       "#wrong"))
        sys.stdout.flush()
    with busy_load.busy(args.busy):
        wrong_total = sweep(args, lib, rank, ranks, expected)
    lib.barrier()
    if args.group:
        lib.job_barrier()
    lib.shutdown()
    if wrong_total:
        print("rank %d: %d wrong results" % (rank, wrong_total), file=sys.stderr)
        return 1
    return 0


def sweep(args, lib, rank, ranks, expected):
    """The timed sweep; returns the number of wrong results."""
    wrong_total = 0
    for size in sizes(parse_size(args.b), parse_size(args.e), args.f):
        count = size // 4
        tensor = torch.empty(count, dtype=torch.float32)
        name = "bench.allreduce.%d" % size
        times, wrong = [], 0
        lib.barrier()
        for iteration in range(args.w + args.n):
            tensor.fill_(rank + 1)
            if args.barrier:
                lib.barrier()
            start = time.perf_counter()
            lib.allreduce_(tensor, name)
            elapsed = time.perf_counter() - start
            if not bool(torch.all(tensor == expected)):
                wrong += 1
            if iteration >= args.w:
                times.append(elapsed)
        # Each iteration's time is the slowest rank's, as kolo-bench and the MPI benchmarks
        # report it.
        per_rank = lib.gather_rows(torch.tensor(times, dtype=torch.float64), name + ".times")
        times = per_rank.max(dim=0).values.tolist()
        seconds = statistics.median(times) if args.stat == "median" else statistics.mean(times)
        algbw = size / seconds / 1e9
        busbw = algbw * 2 * (ranks - 1) / ranks
        wrong_total += wrong
        if rank == 0:
            print("  %10d %12d %6s %6s %10.1f %8.2f %8.2f %6d" % (size, count, "float",
                                                                   "sum", seconds * 1e6, algbw,
                                                                   busbw, wrong))
            sys.stdout.flush()
    return wrong_total


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
