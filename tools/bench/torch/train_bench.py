"""A synthetic training step (ResNet-50 or a small MLP) on kolo.torch, horovod.torch or DDP.

    kolorun -np 2 python train_bench.py --hvd kolo.torch
    horovodrun -np 2 -H localhost:2 --gloo python train_bench.py --hvd horovod.torch
    torchrun --nproc_per_node 2 train_bench.py --ddp               # DistributedDataParallel, gloo
    kolorun -np 2 python train_bench.py --ddp --backend kolo      # DDP on kolo's c10d backend
    torchrun --nproc_per_node 2 train_bench.py --fsdp              # FSDP2 (fully_shard), gloo
    kolorun -np 2 python train_bench.py --fsdp --backend kolo     # FSDP2 on kolo's c10d backend
    kolorun -np 2 python train_bench.py --raw                      # no communication at all

Every rank trains the same model on random data of its own (seeded by its rank) of a fixed
batch (default 8 images of 3x224x224, or 8 vectors for the MLP) with SGD, one compute thread
(torch.set_num_threads(1); --threads 0 leaves torch's default, a thread per core). With
--loader-workers N (ResNet-50 only) each step's batch comes instead from a DataLoader with N
worker processes that make every image as an input pipeline does (a random 256x256 uint8
image, a random 224x224 crop, a random flip, scaling and per-channel normalisation): the
workers compete for the cores with the ranks, as on a training machine
(docs/PERFORMANCE.md, "On a busy machine"); --busy N runs N busy processes beside the ranks
for the timed steps (tools/bench/busy_load.py).
--hvd wraps the optimizer in the module's DistributedOptimizer (gradients averaged as their
hooks fire) after broadcasting the initial weights; --ddp wraps the model in
DistributedDataParallel (gloo); --fsdp shards it with FSDP2's fully_shard, one unit per
bottleneck block (MLP: per linear layer) and the root, so every step all-gathers each unit's
parameters before its forward and backward and reduce-scatters its gradients (FSDP's
collectives: dist.all_gather_into_tensor, dist.reduce_scatter_tensor); --raw runs the same
step with no library: under any launcher,
every rank then computes alone, competing for the same cores as in the other modes, which is
the floor the others are measured against.

After the timed steps, --hvd and --ddp check, untimed, that every rank ends with rank 0's
weights to the bit (their gradients were averaged identically; #wrong counts the ranks that
do not) and exit non-zero otherwise, as allreduce_bench.py checks every result. --fsdp checks
that every rank gathers the same full weights from the shards (that FSDP on kolo trains as on
gloo is tests/python/distributed/test_training.py's).

Rank 0 prints the median (and min, max) time per step over --steps timed steps after
--warmup ones, images per second over all ranks (batch * ranks / step time), and the CPU time
per step of the main thread and of all the process's other threads together (the
communication library's threads, torch's own are none with one compute thread): what the
library takes from the compute cores.
"""

import argparse
import importlib
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import busy_load  # noqa: E402  (tools/bench/busy_load.py)


# ---- models (defined here so that torchvision is not needed) ----

class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        width = planes
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.downsample = None
        if stride != 1 or inplanes != planes * self.expansion:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes * self.expansion, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * self.expansion))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50 v1.5 (stride in the 3x3 convolution): 25.6 M parameters in 161 tensors."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, inplanes = [], 64
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for block in range(blocks):
                layers.append(Bottleneck(inplanes, planes, stride if block == 0 else 1))
                inplanes = planes * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512 * Bottleneck.expansion, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, stride=2, padding=1)
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def mlp(inputs=1024, hidden=2048, classes=10):
    """A small MLP: 6.3 M parameters in 6 tensors, little compute per byte of gradient."""
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, classes))


# ---- the libraries ----

def launcher_rank():
    for variable in ("KOLO_RANK", "HOROVOD_RANK", "RANK", "OMPI_COMM_WORLD_RANK"):
        if variable in os.environ:
            return int(os.environ[variable])
    return 0


def launcher_size():
    for variable in ("KOLO_SIZE", "HOROVOD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if variable in os.environ:
            return int(os.environ[variable])
    return 1


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--hvd", choices=["kolo.torch", "horovod.torch"],
                       help="the Horovod-style module to import")
    which.add_argument("--ddp", action="store_true",
                       help="DistributedDataParallel (run under torchrun, or kolorun)")
    which.add_argument("--fsdp", action="store_true",
                       help="FSDP2's fully_shard (run under torchrun, or kolorun)")
    which.add_argument("--raw", action="store_true", help="the step with no communication")
    parser.add_argument("--backend", choices=["gloo", "kolo"], default="gloo",
                        help="--ddp's and --fsdp's torch.distributed backend (kolo: "
                        "kolo.torch.distributed)")
    parser.add_argument("--model", choices=["resnet50", "mlp"], default="resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image", type=int, default=224, help="ResNet-50 input side")
    parser.add_argument("--steps", type=int, default=5, help="timed steps")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads; 0: torch's default (a thread per core)")
    parser.add_argument("--loader-workers", type=int, default=0,
                        help="N > 0: batches from a DataLoader with N worker processes "
                        "(ResNet-50 only)")
    parser.add_argument("--timeline", metavar="PATH",
                        help="--hvd only: the library's timeline of the timed steps, in PATH "
                        "(kolo.torch: one file per rank, PATH with .rank<r> inserted)")
    busy_load.add_argument(parser)
    return parser.parse_args(argv)


class SyntheticImages(torch.utils.data.Dataset):
    """Images made the way an input pipeline makes them from decoded files: a random 256x256
    uint8 image (seeded by rank and index, so each rank's data differs), a random 224x224
    crop, a random horizontal flip, scaling to [0, 1] and per-channel normalisation."""

    def __init__(self, rank, image, length=1 << 20):
        self.rank, self.image, self.length = rank, image, length
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(self.rank * 1_000_003 + index)
        side = self.image + self.image // 7
        raw = torch.randint(0, 256, (3, side, side), dtype=torch.uint8, generator=g)
        top, left = (int(v) for v in torch.randint(0, side - self.image + 1, (2,), generator=g))
        crop = raw[:, top:top + self.image, left:left + self.image]
        if bool(torch.randint(0, 2, (1,), generator=g)):
            crop = crop.flip(2)
        image = (crop.float() / 255.0 - self.mean) / self.std
        return image, int(torch.randint(0, 1000, (1,), generator=g))


def batches(args, rank, data, target):
    """The steps' input: the fixed batch, or an endless DataLoader's batches."""
    if args.loader_workers <= 0:
        while True:
            yield data, target
    loader = torch.utils.data.DataLoader(
        SyntheticImages(rank, args.image), batch_size=args.batch,
        num_workers=args.loader_workers, persistent_workers=True, prefetch_factor=2)
    while True:
        yield from loader


def flat_weights(model):
    """Every parameter of `model`, flattened into one tensor (a copy; a sharded one gathered)."""
    def full(p):
        return p.full_tensor() if hasattr(p, "full_tensor") else p
    return torch.cat([full(p.detach()).reshape(-1) for p in model.parameters()])


def shard(model):
    """FSDP2 units: each bottleneck block (MLP: each linear layer), then the root."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    unit = Bottleneck if isinstance(model, ResNet50) else nn.Linear
    for module in model.modules():
        if isinstance(module, unit):
            fully_shard(module, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def cpu_seconds():
    """(the process's CPU time, this thread's CPU time) in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, time.thread_time()


def main(argv):
    args = parse_args(argv)
    if args.timeline and not args.hvd:
        print("--timeline needs --hvd (the timeline is the library's)", file=sys.stderr)
        return 2
    if args.loader_workers > 0 and args.model != "resnet50":
        print("--loader-workers needs --model resnet50", file=sys.stderr)
        return 2
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    model = ResNet50() if args.model == "resnet50" else mlp()
    # Each rank's own data: ranks whose gradients were not averaged end with other weights.
    torch.manual_seed(1234 + launcher_rank())
    if args.model == "resnet50":
        data = torch.randn(args.batch, 3, args.image, args.image)
        target = torch.randint(0, 1000, (args.batch,))
    else:
        data = torch.randn(args.batch, 1024)
        target = torch.randint(0, 10, (args.batch,))
    if not args.fsdp:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    if args.raw:
        library, rank, ranks = "raw (no communication)", launcher_rank(), launcher_size()
        barrier, shutdown = (lambda: None), (lambda: None)
        wrong_weights = lambda: 0  # noqa: E731  (nothing to compare: each rank on its own)
    elif args.ddp or args.fsdp:
        import torch.distributed as dist
        if args.backend == "kolo":
            import kolo.torch.distributed  # noqa: F401  (registers the backend)
        dist.init_process_group(args.backend)
        library = "%s(%s)" % ("DDP" if args.ddp else "FSDP2", args.backend)
        rank, ranks = dist.get_rank(), dist.get_world_size()
        if args.ddp:
            model = nn.parallel.DistributedDataParallel(model)
        else:
            model = shard(model)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        barrier, shutdown = dist.barrier, dist.destroy_process_group

        def wrong_weights():
            mine = flat_weights(model)
            root = mine.clone()
            dist.broadcast(root, 0)
            wrong = torch.tensor([0 if torch.equal(root, mine) else 1])
            dist.all_reduce(wrong)
            return int(wrong.item())
    else:
        hvd = importlib.import_module(args.hvd)
        hvd.init()
        library, rank, ranks = args.hvd, hvd.rank(), hvd.size()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        optimizer = hvd.DistributedOptimizer(optimizer,
                                             named_parameters=model.named_parameters())
        barrier = lambda: hvd.allreduce(torch.zeros(1), name="bench.barrier")  # noqa: E731
        shutdown = hvd.shutdown

        def wrong_weights():
            mine = flat_weights(model)
            root = hvd.broadcast(mine, 0, name="bench.weights")
            wrong = torch.tensor([0 if torch.equal(root, mine) else 1])
            return int(hvd.allreduce(wrong, op=hvd.Sum, name="bench.wrong").item())

    inputs = batches(args, rank, data, target)

    def step():
        images, labels = next(inputs)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    barrier()
    if args.timeline:
        hvd.start_timeline(args.timeline)
    times = []
    with busy_load.busy(args.busy):
        process0, thread0 = cpu_seconds()
        for _ in range(args.steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        process1, thread1 = cpu_seconds()
    barrier()
    if args.timeline:
        hvd.stop_timeline()
    wrong = wrong_weights()
    main_cpu = (thread1 - thread0) / args.steps
    other_cpu = max(0.0, (process1 - process0) / args.steps - main_cpu)  # clock granularity
    median = statistics.median(times)
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        print("# %s, %s (%.1f M parameters), batch %d per rank, %d ranks, %d thread(s), %s, "
              "torch %s, %d timed steps after %d" % (
                  library, args.model, params / 1e6, args.batch, ranks, torch.get_num_threads(),
                  "%d loader workers" % args.loader_workers if args.loader_workers > 0
                  else "a fixed batch", torch.__version__, args.steps, args.warmup))
        print("# %12s %10s %10s %10s %14s %14s %7s" % ("ms/step", "min", "max", "img/s",
                                                       "main-cpu-ms", "other-cpu-ms",
                                                       "#wrong"))
        print("  %12.1f %10.1f %10.1f %10.2f %14.1f %14.1f %7d" % (
            median * 1e3, min(times) * 1e3, max(times) * 1e3, args.batch * ranks / median,
            main_cpu * 1e3, other_cpu * 1e3, wrong))
        sys.stdout.flush()
    shutdown()
    if wrong:
        print("rank %d: %d rank(s) ended with weights other than rank 0's" % (rank, wrong),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
