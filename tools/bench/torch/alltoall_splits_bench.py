"""kolo.torch's alltoall (Horovod's hvd.alltoall) with splits that repeat and splits that change
every call, as a mixture of experts' router makes them: the case the fast path takes (cached
splits) and the one that goes to the controller every call.

    kolorun -np 4 python alltoall_splits_bench.py [-n 50] [-w 10] [--cols 64]

Each call: an untimed allreduce lines the ranks up, then one alltoall of float32 rows is timed
and its result checked (row values name the sending rank). Rank 0 prints the median over -n
timed calls (after -w) of its own time for each kind, and exits non-zero on a wrong result.
"""

import argparse
import statistics
import sys
import time

import torch

import kolo.torch as hvd


def splits_of(kind, step, rank, size):
    if kind == "repeated":
        return [8] * size
    # Every rank's splits change every call, 1..13 rows to each rank.
    return [((step * 7 + rank * 3 + d * 5) % 13) + 1 for d in range(size)]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=50, help="timed calls per kind")
    parser.add_argument("-w", type=int, default=10, help="untimed calls first")
    parser.add_argument("--cols", type=int, default=64, help="float32 elements a row")
    args = parser.parse_args(argv)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    wrong = 0
    medians = {}
    for kind in ("repeated", "changing"):
        times = []
        for step in range(args.w + args.n):
            splits = splits_of(kind, step, rank, size)
            x = torch.full((sum(splits), args.cols), float(rank))
            hvd.allreduce(torch.zeros(1), name="line_up")
            start = time.perf_counter()
            y, _ = hvd.alltoall(x, splits=torch.tensor(splits, dtype=torch.int32),
                                name="a2a_" + kind)  # the output and the received splits
            took = time.perf_counter() - start
            rows = [splits_of(kind, step, s, size)[rank] for s in range(size)]
            expected = torch.cat([torch.full((r, args.cols), float(s)) for s, r in enumerate(rows)])
            wrong += int(not torch.equal(y, expected))
            if step >= args.w:
                times.append(took * 1e6)
        medians[kind] = statistics.median(times)
    wrong = int(hvd.allreduce(torch.tensor([wrong]), op=hvd.Sum, name="wrong").item())
    if rank == 0:
        print(f"# kolo.torch alltoall, {size} ranks, rows of {args.cols} float32; median us of "
              f"rank 0 over {args.n} calls; #wrong {wrong}")
        for kind, us in medians.items():
            print(f"{kind:>9} splits: {us:10.1f} us")
    hvd.shutdown()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
