"""A DDP script that never imports kolo: torch finds the "kolo" backend through kolo's
torch.distributed.backends entry point (build/python/kolo-<version>.dist-info), as a user's
unchanged script would. It trains on kolo and, in the same job, on a gloo group from the same
seed, and checks that every rank ends with gloo's weights. ctest runs it under kolorun and
under torchrun at 2 ranks (tests/python/CMakeLists.txt); a watchdog ends a stuck rank."""

import faulthandler
import sys

import torch
import torch.distributed as dist

faulthandler.dump_traceback_later(90, exit=True)
torch.set_num_threads(1)
assert "kolo" not in sys.modules, "the script must not import kolo"
dist.init_process_group("kolo")
assert "kolo.torch.distributed" in sys.modules  # loaded by torch, through the entry point
assert dist.get_backend() == "kolo"
gloo = dist.new_group(backend="gloo")
rank, size = dist.get_rank(), dist.get_world_size()


def train(group):
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)),
        process_group=group)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(rank)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 8, generator=data)).square().sum().backward()
        optimizer.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


on_kolo, on_gloo = train(None), train(gloo)
torch.testing.assert_close(on_kolo, on_gloo, rtol=1e-5, atol=1e-6)
everyone = [torch.empty_like(on_kolo) for _ in range(size)]
dist.all_gather(everyone, on_kolo)
assert all(torch.equal(w, on_kolo) for w in everyone), "ranks ended with different weights"
dist.destroy_process_group()
print("rank %d: the weights of gloo, on every rank" % rank, flush=True)
