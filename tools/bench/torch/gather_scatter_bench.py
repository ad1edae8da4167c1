"""FSDP's two collectives from Python: dist.all_gather_into_tensor and dist.reduce_scatter_tensor
(sum) of float32 CPU tensors on torch.distributed, in kolo-bench's columns.

    kolorun -np 2 python gather_scatter_bench.py --backend kolo     # kolo.torch.distributed
    torchrun --nproc_per_node 2 gather_scatter_bench.py             # gloo

The size is the bigger buffer (all_gather_into_tensor's output, reduce_scatter_tensor's input),
as kolo-bench -o allgather|reducescatter counts it. Every iteration fills the input untimed (rank
r writes r+1), waits at an untimed barrier, times one call (which returns when the result is
there) and checks the result untimed (#wrong: iterations with a wrong result, summed over the
ranks).
Rank 0 prints, per op and size, the --stat over -n timed iterations (after -w warmup ones) of the
slowest rank's time, algbw = size/time and busbw = algbw*(n-1)/n, and #wrong. Exits non-zero if
any result was wrong.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from sweep_sizes import parse_size, sizes


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["gloo", "kolo"], default="gloo")
    parser.add_argument("--ops", default="allgather,reducescatter",
                        help="comma-separated: allgather (all_gather_into_tensor), "
                        "reducescatter (reduce_scatter_tensor)")
    parser.add_argument("-b", default="64K", help="smallest size in bytes (4K, 1M)")
    parser.add_argument("-e", default="64M", help="largest size in bytes")
    parser.add_argument("-f", type=int, default=4, help="size step factor")
    parser.add_argument("-n", type=int, default=20, help="timed iterations per size")
    parser.add_argument("-w", type=int, default=3, help="warmup iterations per size")
    parser.add_argument("--stat", choices=["mean", "median"], default="median")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    return parser.parse_args(argv)


def run_op(op, size, rank, ranks, args):
    """Times `op` at `size` bytes; returns this rank's times and its count of wrong results."""
    part = size // 4 // ranks  # float32 elements a rank contributes or receives
    small = torch.empty(part, dtype=torch.float32)
    big = torch.empty(part * ranks, dtype=torch.float32)
    times, wrong = [], 0
    for iteration in range(args.w + args.n):
        if op == "allgather":
            small.fill_(rank + 1)
            expected = torch.arange(1, ranks + 1, dtype=torch.float32).repeat_interleave(part)
        else:
            big.fill_(rank + 1)
            expected = torch.full((part,), ranks * (ranks + 1) / 2, dtype=torch.float32)
        dist.barrier()
        start = time.perf_counter()
        if op == "allgather":
            dist.all_gather_into_tensor(big, small)
        else:
            dist.reduce_scatter_tensor(small, big, op=dist.ReduceOp.SUM)
        elapsed = time.perf_counter() - start
        result = big if op == "allgather" else small
        if not torch.equal(result, expected):
            wrong += 1
        if iteration >= args.w:
            times.append(elapsed)
    return times, wrong


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.backend == "kolo":
        import kolo.torch.distributed  # noqa: F401  (registers the backend)
    dist.init_process_group(args.backend)
    rank, ranks = dist.get_rank(), dist.get_world_size()
    ops = [op for op in args.ops.split(",") if op]
    for op in ops:
        if op not in ("allgather", "reducescatter"):
            print("gather_scatter_bench: unknown op %r" % op, file=sys.stderr)
            return 2
    if rank == 0:
        print("# torch.distributed(%s), %d ranks, pid %d, torch %s, float32, %s of %d iterations"
              " after %d warmup, a barrier before each" % (args.backend, ranks, os.getpid(),
                                                          torch.__version__, args.stat, args.n,
                                                          args.w))
        print("# %13s %10s %12s %10s %8s %8s %6s" % ("op", "size", "count", "time(us)", "algbw",
                                                     "busbw", "#wrong"))
        sys.stdout.flush()
    wrong_total = 0
    for op in ops:
        for size in sizes(parse_size(args.b), parse_size(args.e), args.f):
            times, wrong = run_op(op, size, rank, ranks, args)
            # Each iteration's time is the slowest rank's.
            gathered = [torch.empty(len(times), dtype=torch.float64) for _ in range(ranks)]
            dist.all_gather(gathered, torch.tensor(times, dtype=torch.float64))
            slowest = torch.stack(gathered).max(dim=0).values.tolist()
            seconds = (statistics.median(slowest) if args.stat == "median"
                       else statistics.mean(slowest))
            algbw = size / seconds / 1e9
            wrong_total += wrong
            wrong_everywhere = torch.tensor([wrong], dtype=torch.int64)
            dist.all_reduce(wrong_everywhere)
            wrong = int(wrong_everywhere.item())
            if rank == 0:
                print("  %13s %10d %12d %10.1f %8.2f %8.2f %6d" % (
                    op, size, size // 4, seconds * 1e6, algbw, algbw * (ranks - 1) / ranks,
                    wrong))
                sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()
    if wrong_total:
        print("rank %d: %d wrong results" % (rank, wrong_total), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
