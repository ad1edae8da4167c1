"""What the framework scripts here share: the model, the data, the end-of-job checks, and a
plain DDP training on a gloo group (the reference where the framework's own loop is that)."""

import faulthandler
import sys

import torch
import torch.distributed as dist

SKIP_CODE = 77  # SKIP_RETURN_CODE of these ctests


def start(package):
    """Arms the watchdog; ends the job as skipped, naming the install, if `package` is missing."""
    faulthandler.dump_traceback_later(150, exit=True)
    torch.set_num_threads(1)
    try:
        __import__(package)
    except ImportError:
        print("%s is not installed in this Python (%s); tools/install-deps.sh --torch installs "
              "it" % (package, sys.executable), flush=True)
        sys.exit(SKIP_CODE)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


def dataset():
    generator = torch.Generator().manual_seed(1)
    return torch.utils.data.TensorDataset(torch.randn(64, 8, generator=generator),
                                          torch.randn(64, 2, generator=generator))


BATCH, EPOCHS, LR = 4, 2, 0.1


def weights(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train_on_gloo():
    """The same training with plain DDP on a gloo group: each rank's shard as a
    DistributedSampler without shuffling gives it, SGD, mean squared error."""
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    model = torch.nn.parallel.DistributedDataParallel(make_model(), process_group=gloo)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    sampler = torch.utils.data.DistributedSampler(dataset(), num_replicas=size, rank=rank,
                                                  shuffle=False)
    loader = torch.utils.data.DataLoader(dataset(), batch_size=BATCH, sampler=sampler)
    for _ in range(EPOCHS):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    return weights(model)


def check_same_everywhere(trained):
    everyone = [torch.empty_like(trained) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, trained)
    assert all(torch.equal(w, trained) for w in everyone), "ranks ended with different weights"


def finish():
    """Ends the job as torch asks: every rank past its last collective, then every group
    destroyed while the interpreter is whole. Without it gloo's worker threads can outlive the
    group at exit and abort the process ("terminate called without an active exception",
    pytorch/pytorch#190489), which failed a CI run after a correct training."""
    dist.barrier()
    dist.destroy_process_group()


def check(trained, framework, on_gloo):
    """`trained` (this rank's weights after the framework's run on kolo) equals `on_gloo` and is
    the same on every rank."""
    assert dist.get_backend() == "kolo", "the default group is %s" % dist.get_backend()
    torch.testing.assert_close(trained, on_gloo, rtol=1e-5, atol=1e-6)
    check_same_everywhere(trained)
    print("rank %d: %s on kolo ends with gloo's weights, on every rank" % (dist.get_rank(),
                                                                          framework), flush=True)
