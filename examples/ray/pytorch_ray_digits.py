"""Horovod's examples/ray/tensorflow2_mnist_ray.py, in PyTorch, on kolo: a fixed job of Ray
actors with RayExecutor. From a Horovod script only the imports change (`import kolo.torch as
hvd`, `from kolo.ray import RayExecutor`); this port trains on the 8x8 digits that ship with
kolo (examples/data/digits.csv) instead of downloading MNIST. (Horovod's example passes
num_slots= and cpus_per_slot=, which its own RayExecutor no longer takes: they are
num_workers_per_host= and cpus_per_worker=.)

    python examples/ray/pytorch_ray_digits.py --address auto --num-hosts 2 --workers-per-host 2
"""

import argparse
import os

import ray
import torch
import torch.nn.functional as F

from kolo.ray import RayExecutor  # with Horovod: from horovod.ray import RayExecutor

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv")

parser = argparse.ArgumentParser(description="PyTorch on Ray (kolo)")
parser.add_argument("--address", default=None, help="Ray cluster address (default: local)")
parser.add_argument("--num-workers", type=int, default=2)
parser.add_argument("--num-hosts", type=int, default=None, help="instead of --num-workers")
parser.add_argument("--workers-per-host", type=int, default=1)
parser.add_argument("--epochs", type=int, default=2)


def train(num_epochs, data_path):
    import kolo.torch as hvd  # with Horovod: import horovod.torch as hvd
    hvd.init()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rows = torch.tensor([[int(v) for v in line.split(",")] for line in open(data_path)
                         if line.strip()], dtype=torch.float32)
    features, labels = rows[:, :64] / 16.0, rows[:, 64].long()
    # Horovod: each rank trains on its shard.
    shard = slice(hvd.rank(), None, hvd.size())
    features, labels = features[shard], labels[shard]
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    # Horovod: scale the learning rate by the number of workers, wrap the optimizer and start
    # every rank from rank 0's weights.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    for epoch in range(num_epochs):
        for start in range(0, len(labels), 32):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(features[start:start + 32]), labels[start:start + 32])
            loss.backward()
            optimizer.step()
        loss = hvd.allreduce(loss.detach(), name="loss").item()
        if hvd.rank() == 0:  # Horovod: write logs on worker 0
            print("epoch %d loss %.4f on %d workers" % (epoch, loss, hvd.size()))
    accuracy = (model(features).argmax(1) == labels).float().mean()
    return hvd.allreduce(accuracy, name="accuracy").item()


if __name__ == "__main__":
    args = parser.parse_args()
    ray.init(address=args.address)
    settings = RayExecutor.create_settings(timeout_s=30)
    if args.num_hosts:
        executor = RayExecutor(settings, num_hosts=args.num_hosts,
                               num_workers_per_host=args.workers_per_host, use_gpu=False,
                               cpus_per_worker=1)
    else:
        executor = RayExecutor(settings, num_workers=args.num_workers, use_gpu=False,
                               cpus_per_worker=1)
    executor.start()
    accuracies = executor.run(train, kwargs=dict(num_epochs=args.epochs, data_path=DATA))
    print("accuracy per rank:", " ".join("%.3f" % a for a in accuracies))
    executor.shutdown()
