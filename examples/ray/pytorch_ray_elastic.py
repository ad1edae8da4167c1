"""Horovod's examples/ray/pytorch_ray_elastic.py on kolo: an elastic PyTorch job on a Ray
cluster with ElasticRayExecutor. The only change a Horovod script needs is the import
(`import kolo.torch as hvd`, `from kolo.ray import ElasticRayExecutor`); this port also trains on
the 8x8 digits that ship with kolo (examples/data/digits.csv) instead of downloading MNIST, with
a small MLP instead of the MNIST CNN.

    python examples/ray/pytorch_ray_elastic.py --address auto --epochs 3

Each worker is a Ray actor; kill one (or a node) and the others reset and go on, add a node and
the job grows onto it at the next commit (docs/ENGINES.md).
"""

import argparse
import os

import ray
import torch
import torch.nn.functional as F

import kolo.torch as hvd  # with Horovod: import horovod.torch as hvd

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv")

parser = argparse.ArgumentParser(description="Elastic PyTorch on Ray (kolo)")
parser.add_argument("--address", default=None, help="Ray cluster address (default: local)")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--num-batches-per-commit", type=int, default=1)
parser.add_argument("--min-workers", type=int, default=2)
parser.add_argument("--max-workers", type=int, default=None)
parser.add_argument("--cpus-per-slot", type=int, default=1)
parser.add_argument("--data", default=DATA)
args = parser.parse_args()


def load_digits(path):
    rows = torch.tensor([[int(v) for v in line.split(",")] for line in open(path)
                         if line.strip()], dtype=torch.float32)
    return torch.utils.data.TensorDataset(rows[:, :64] / 16.0, rows[:, 64].long())


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def metric_average(val, name):
    return hvd.allreduce(torch.tensor(val), name=name).item()


def train_fn():
    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    dataset = load_digits(args.data)
    train_set, test_set = torch.utils.data.random_split(
        dataset, [1497, len(dataset) - 1497], generator=torch.Generator().manual_seed(0))
    # Elastic: the sampler re-partitions the rest of the epoch after each reset.
    train_sampler = hvd.elastic.ElasticSampler(train_set, shuffle=True, seed=args.seed)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size,
                                               sampler=train_sampler)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, args.epochs + 1):
            state.model.train()
            for batch_idx, (data, target) in enumerate(train_loader):
                state.optimizer.zero_grad()
                loss = F.nll_loss(state.model(data), target)
                loss.backward()
                state.optimizer.step()
                state.train_sampler.record_batch(batch_idx, args.batch_size)
                if batch_idx % args.log_interval == 0:
                    print("Train Epoch: {} [{}/{}]\tLoss: {:.6f}\tranks: {}".format(
                        state.epoch, batch_idx * len(data), len(train_sampler), loss.item(),
                        hvd.size()))
                if (batch_idx + 1) % args.num_batches_per_commit == 0:
                    state.commit()
            state.train_sampler.set_epoch(state.epoch + 1)

    def test():
        model.eval()
        data, target = (torch.stack(t) for t in zip(*[test_set[i] for i in range(len(test_set))]))
        output = model(data)
        loss = metric_average(F.nll_loss(output, target).item(), "avg_loss")
        accuracy = metric_average((output.argmax(1) == target).float().mean().item(),
                                  "avg_accuracy")
        if hvd.rank() == 0:
            print("\nTest set: Average loss: {:.4f}, Accuracy: {:.2f}%\n".format(
                loss, 100.0 * accuracy))
        return accuracy

    def on_state_reset():  # the learning rate follows the number of workers
        for param_group in optimizer.param_groups:
            param_group["lr"] = args.lr * hvd.size()

    state = hvd.elastic.TorchState(model, optimizer, train_sampler=train_sampler, epoch=1)
    state.register_reset_callbacks([on_state_reset])
    train(state)
    return test()


if __name__ == "__main__":
    from kolo.ray import ElasticRayExecutor  # with Horovod: from horovod.ray import ...
    ray.init(address=args.address)
    settings = ElasticRayExecutor.create_settings(min_num_proc=args.min_workers,
                                                  max_num_proc=args.max_workers, verbose=True)
    executor = ElasticRayExecutor(settings, use_gpu=False, cpus_per_slot=args.cpus_per_slot)
    executor.start()
    accuracies = executor.run(train_fn)
    print("accuracy per rank:", " ".join("%.3f" % a for a in accuracies))
