"""Point-to-point on torch.distributed: the "kolo" backend against gloo in the same 2-rank job,
timed the same way (issue 57; docs/PERFORMANCE.md, "Point-to-point on torch.distributed").

    kolorun --bind-to none -np 2 python p2p_bench.py                     # kolo over shm
    KOLO_TRANSPORT=tcp kolorun --bind-to none -np 2 python p2p_bench.py  # kolo over TCP
    torchrun --nproc-per-node 2 p2p_bench.py                             # also works

Placement matters to gloo: kolorun binds each rank to a core by default, and there gloo's
transfers (on a thread of its own beside the caller's) took ~15x longer at 4 KiB on a 2-core
machine; --bind-to none places the ranks as torchrun does.

The job's default group is kolo; a gloo group over both ranks (dist.new_group(backend="gloo"))
runs beside it. Every measurement runs on both, in rounds that interleave the two (kolo first in
even rounds, gloo first in odd ones); each round gives one figure per backend, and the table
shows the median over the rounds, the ratio (>1: kolo is faster) and each backend's range over
the rounds. The tests:

- latency: rank 0 sends a message, rank 1 sends it back (dist.send / dist.recv), --iters times;
  the figure is half the mean round trip.
- send-bw: rank 0 sends --bytes-per-round of messages with dist.send, rank 1 receives them with
  dist.recv, then sends back 4 bytes; the figure is the bytes over rank 0's time until then.
- isend-bw: the same with dist.isend / dist.irecv, up to --window messages in flight.
- pipeline: a training step of an MLP split in two stages (torch.distributed.pipelining,
  Schedule1F1B, 4 micro-batches, SGD); the figure is the slower rank's ms per step.

Each round checks what it received (rank 0 fills the messages with the round's number); a wrong
message counts in #wrong, and the script exits 1 if any was wrong. A barrier on the backend's
group precedes every timed section. Rank 0 prints the table, naming the CPU.
"""

import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from sweep_sizes import parse_size


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="kolo,gloo",
                        help="comma-separated, of kolo and gloo (one alone: no ratios)")
    parser.add_argument("--tests", default="latency,send-bw,isend-bw,pipeline",
                        help="comma-separated, of latency, send-bw, isend-bw, pipeline")
    parser.add_argument("--latency-sizes", default="4K,64K", help="comma-separated sizes")
    parser.add_argument("--bw-sizes", default="1M,4M,16M,64M", help="comma-separated sizes")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--iters", type=int, default=200, help="ping-pongs per latency round")
    parser.add_argument("--bytes-per-round", default="256M",
                        help="bytes a bandwidth round sends (at least 2 messages)")
    parser.add_argument("--window", type=int, default=4, help="isend-bw: messages in flight")
    parser.add_argument("--width", type=int, default=1024, help="pipeline: the MLP's width")
    parser.add_argument("--layers", type=int, default=8, help="pipeline: Linear+ReLU blocks")
    parser.add_argument("--batch", type=int, default=64, help="pipeline: batch (4 micro-batches)")
    parser.add_argument("--steps", type=int, default=5, help="pipeline: timed steps per round")
    parser.add_argument("--warmup", type=int, default=1, help="warmup round (untimed)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds any one op may take (both groups' timeout)")
    args = parser.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    args.tests = [t for t in args.tests.split(",") if t]
    args.latency_sizes = [parse_size(s) for s in args.latency_sizes.split(",") if s]
    args.bw_sizes = [parse_size(s) for s in args.bw_sizes.split(",") if s]
    args.bytes_per_round = parse_size(args.bytes_per_round)
    for backend in args.backends:
        if backend not in ("kolo", "gloo"):
            parser.error("unknown backend %r" % backend)
    for test in args.tests:
        if test not in ("latency", "send-bw", "isend-bw", "pipeline"):
            parser.error("unknown test %r" % test)
    return args


class Peer:
    """One backend's group and this rank's buffers for it."""

    def __init__(self, name, group):
        self.name, self.group = name, group
        self.rank = dist.get_rank()
        self.peer = 1 - self.rank
        self.wrong = 0
        self.pipeline = None

    def barrier(self):
        dist.barrier(group=self.group)

    def send(self, tensor):
        dist.send(tensor, self.peer, group=self.group)

    def recv(self, tensor):
        dist.recv(tensor, self.peer, group=self.group)

    def check(self, tensor, value):
        if not bool((tensor == value).all()):
            self.wrong += 1


def latency(peer, size, round_number, args):
    """Seconds one way: half the mean round trip of --iters ping-pongs."""
    value = round_number % 251
    buffer = torch.full((size,), value if peer.rank == 0 else 255, dtype=torch.uint8)
    peer.barrier()
    start = time.perf_counter()
    for _ in range(args.iters):
        if peer.rank == 0:
            peer.send(buffer)
            peer.recv(buffer)
        else:
            peer.recv(buffer)
            peer.send(buffer)
    elapsed = time.perf_counter() - start
    peer.check(buffer, value)
    return elapsed / args.iters / 2


def bandwidth(peer, size, round_number, args, asynchronous):
    """Bytes per second from rank 0 to rank 1 (rank 0's clock, until rank 1's 4-byte answer)."""
    count = max(2, args.bytes_per_round // size)
    window = args.window if asynchronous else 1
    value = round_number % 251
    buffers = [torch.full((size,), value if peer.rank == 0 else 255, dtype=torch.uint8)
               for _ in range(min(window, count))]
    answer = torch.zeros(1, dtype=torch.int32)
    peer.barrier()
    start = time.perf_counter()
    if asynchronous:
        post = dist.isend if peer.rank == 0 else dist.irecv
        in_flight = []
        for i in range(count):
            if len(in_flight) == window:
                in_flight.pop(0).wait()
            in_flight.append(post(buffers[i % window], peer.peer, group=peer.group))
        for work in in_flight:
            work.wait()
    else:
        for i in range(count):
            (peer.send if peer.rank == 0 else peer.recv)(buffers[0])
    if peer.rank == 0:
        peer.recv(answer)
    else:
        peer.send(answer)
    elapsed = time.perf_counter() - start
    if peer.rank == 1:
        for buffer in buffers:
            peer.check(buffer, value)
    return size * count / elapsed


def make_pipeline(peer, args):
    """This rank's stage of the 2-stage MLP on the backend's group, with its schedule."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    torch.manual_seed(7)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(args.width, 10))
    half = len(layers) // 2 // 2 * 2  # a whole number of blocks on stage 0
    module = torch.nn.Sequential(*(layers[:half] if peer.rank == 0 else layers[half:]))
    stage = PipelineStage(module, peer.rank, 2, torch.device("cpu"), group=peer.group)
    schedule = Schedule1F1B(stage, n_microbatches=4,
                            loss_fn=torch.nn.functional.cross_entropy)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(8)
    data = (torch.randn(args.batch, args.width, generator=g),
            torch.randint(0, 10, (args.batch,), generator=g))
    return schedule, optimizer, data


def pipeline_step(peer, args, steps):
    """Seconds per training step on this rank."""
    if peer.pipeline is None:
        peer.pipeline = make_pipeline(peer, args)
    schedule, optimizer, (x, y) = peer.pipeline
    peer.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        if peer.rank == 0:
            schedule.step(x)
        else:
            schedule.step(target=y)
        optimizer.step()
    return (time.perf_counter() - start) / steps


def slower_rank(seconds):
    """The larger of the ranks' times (a pipeline step ends on different ranks at different
    times), through the default group, untimed."""
    value = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def measurements(args):
    """(label, size, unit, function(peer, round)) of every figure, in the table's order."""
    rows = []
    if "latency" in args.tests:
        for size in args.latency_sizes:
            rows.append(("latency", size, "us",
                         lambda peer, r, s=size: latency(peer, s, r, args)))
    for test, asynchronous in (("send-bw", False), ("isend-bw", True)):
        if test in args.tests:
            for size in args.bw_sizes:
                rows.append((test, size, "GB/s",
                             lambda peer, r, s=size, a=asynchronous:
                             bandwidth(peer, s, r, args, a)))
    if "pipeline" in args.tests:
        rows.append(("pipeline-1f1b", 0, "ms/step",
                     lambda peer, r: slower_rank(pipeline_step(peer, args, args.steps))))
    return rows


def scale(unit, value):
    return {"us": value * 1e6, "GB/s": value / 1e9, "ms/step": value * 1e3}[unit]


def size_text(size):
    if not size:
        return "-"
    for suffix, unit in (("M", 1 << 20), ("K", 1 << 10)):
        if size % unit == 0:
            return "%d%s" % (size // unit, suffix)
    return str(size)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def print_header(args, rank, ranks):
    if rank != 0:
        return
    print("# p2p_bench: %d ranks, %s (%d cores), torch %s, kolo KOLO_TRANSPORT=%s, "
          "median of %d interleaved rounds (after %d warmup), %d threads, pid %d" % (
              ranks, cpu_name(), os.cpu_count() or 0, torch.__version__,
              os.environ.get("KOLO_TRANSPORT", "auto"), args.rounds, args.warmup, args.threads,
              os.getpid()))
    names = "".join("%12s" % b for b in args.backends)
    ratio = "%12s" % "kolo/gloo" if len(args.backends) == 2 else ""
    ranges = "".join("  %s range" % b for b in args.backends)
    print("# %-14s %6s %8s%s%s%s" % ("test", "size", "unit", names, ratio, ranges))
    sys.stdout.flush()


def run_row(peers, row, args):
    """One row's figures (seconds or bytes per second), a list per backend, in round order."""
    label, size, unit, measure = row
    figures = {peer.name: [] for peer in peers}
    for r in range(args.warmup + args.rounds):
        order = peers if r % 2 == 0 else list(reversed(peers))
        for peer in order:
            value = measure(peer, r)
            if r >= args.warmup:
                figures[peer.name].append(value)
    return figures


def print_row(label, size, unit, figures):
    """The medians, the ratio kolo/gloo (>1: kolo faster) and each backend's range."""
    medians = [statistics.median(values) for values in figures]
    line = "  %-14s %6s %8s%s" % (label, size_text(size), unit,
                                  "".join("%12.2f" % scale(unit, m) for m in medians))
    if len(medians) == 2:
        kolo, gloo = medians
        line += "%11.2fx" % (kolo / gloo if unit == "GB/s" else gloo / kolo)
    for values in figures:
        low, high = sorted(scale(unit, v) for v in (min(values), max(values)))
        line += "  %.3g-%.3g" % (low, high)
    print(line)
    sys.stdout.flush()


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    import kolo.torch.distributed  # noqa: F401  (registers the backend)

    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group("kolo", timeout=timeout)
    rank, ranks = dist.get_rank(), dist.get_world_size()
    if ranks != 2:
        if rank == 0:
            print("p2p_bench: needs 2 ranks, got %d" % ranks, file=sys.stderr)
        dist.destroy_process_group()
        return 2
    gloo = dist.new_group(backend="gloo", timeout=timeout)
    groups = {"kolo": None, "gloo": gloo}
    peers = [Peer(name, groups[name]) for name in args.backends]
    print_header(args, rank, ranks)
    for row in measurements(args):
        label, size, unit, _ = row
        figures = run_row(peers, row, args)
        if rank == 0:
            print_row(label, size, unit, [figures[p.name] for p in peers])
    wrong = torch.tensor([sum(p.wrong for p in peers)], dtype=torch.int64)
    dist.all_reduce(wrong)
    if rank == 0:
        print("# #wrong: %d" % wrong.item())
    dist.barrier()
    dist.destroy_process_group()
    return 1 if wrong.item() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
