"""Data-parallel training of a small MLP on the 8x8 digits (examples/data/digits.csv), written
for Horovod's PyTorch API: the import below is the only line that differs from a horovod.torch
script. Run on 4 ranks (after tools/install-deps.sh --torch and the build):

    PYTHONPATH=build/python build/bin/kolorun -np 4 .venv/torch/bin/python \\
        examples/pytorch/train_digits.py

Each rank trains on its own quarter of the training set; every rank ends with the same
weights, which the last line checks (one line per rank, identical on all).
"""

import argparse
import hashlib
import os

import torch

import kolo.torch as hvd  # with Horovod: import horovod.torch as hvd

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv")


def load_digits(path):
    rows = [[int(v) for v in line.split(",")] for line in open(path) if line.strip()]
    data = torch.tensor(rows, dtype=torch.float32)
    return data[:, :64] / 16.0, data[:, 64].long()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05, help="scaled by the number of ranks")
    parser.add_argument("--data", default=DATA)
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(1234 + hvd.rank())  # different on purpose: broadcast_parameters fixes it
    torch.set_num_threads(1)

    features, labels = load_digits(args.data)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(7))
    test, train = order[:297], order[297:]
    shard = train[hvd.rank()::hvd.size()]  # this rank's part of the training set

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    steps = len(shard) // args.batch_size
    for epoch in range(args.epochs):
        permutation = shard[torch.randperm(len(shard),
                                           generator=torch.Generator().manual_seed(epoch))]
        total = 0.0
        for step in range(steps):
            batch = permutation[step * args.batch_size:(step + 1) * args.batch_size]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(features[batch]), labels[batch])
            loss.backward()
            optimizer.step()
            total += loss.item()
        mean_loss = hvd.allreduce(torch.tensor(total / steps), name="loss").item()
        if hvd.rank() == 0 and (epoch % 5 == 4 or epoch == args.epochs - 1):
            print("epoch %d: loss %.4f" % (epoch + 1, mean_loss), flush=True)

    with torch.no_grad():
        accuracy = (model(features[test]).argmax(1) == labels[test]).float().mean().item()
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()[:16]
    everyone = hvd.allgather_object(digest)
    same = all(d == digest for d in everyone)
    print("final: accuracy=%.4f weights_sha256=%s identical_on_all_%d_ranks=%s"
          % (accuracy, digest, hvd.size(), same), flush=True)
    hvd.shutdown()
    if not same:
        raise SystemExit("weights differ between ranks")


if __name__ == "__main__":
    main()
