"""Elastic training on the 8x8 digits with Horovod's elastic API (hvd.elastic): the job keeps
training when a rank is lost and grows when a host joins. Launch it with kolorun's elastic mode
(docs/ELASTIC.md); the discovery script prints the hosts ("host:slots" lines):

    printf 'localhost:2\\n127.0.0.2:1\\n127.0.0.3:1\\n' > /tmp/hosts.txt
    PYTHONPATH=build/python build/bin/kolorun -np 4 --min-np 2 --max-np 4 \\
        --host-discovery-script 'cat /tmp/hosts.txt' \\
        .venv/torch/bin/python examples/pytorch/elastic_train.py --batch-ms 50

then kill -9 a worker's pid (each prints it) and watch the others go on, or add a line
("127.0.0.4:1") to the file and watch the job grow. Outside kolorun's elastic mode the same
script runs as a fixed-size job.

The state (model, optimizer, ElasticSampler, epoch) is committed every --commit-every batches.
So that a test can check that every sample of an epoch was processed exactly once, the state
also holds the indices the job processed this epoch (every rank's, gathered after each batch;
the sampler's padding left out): rank 0 prints them at the end of each epoch. Lines:
  "start rank R of S pid P time T"     at every (re)start of the training function
  "training rank R of S pid P time T"  after its first batch there
  "epoch E indices I,J,... pads N"     (rank 0) at each epoch's end
  "done rank R of S checksum C"        (every rank) at the end: C is a hash of the weights,
                                       the same on every rank
"""

import argparse
import hashlib
import os
import time

import torch

import kolo.torch as hvd  # with Horovod: import horovod.torch as hvd

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv")


def load_digits(path, samples):
    rows = [[int(v) for v in line.split(",")] for line in open(path) if line.strip()]
    data = torch.tensor(rows[:samples] if samples else rows, dtype=torch.float32)
    return data[:, :64] / 16.0, data[:, 64].long()


def say(text):
    print(text, flush=True)


def checksum(model):
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def batches(sampler, batch_size):
    """This rank's batches of the rest of the epoch: (positions in the padded order, indices),
    so that the sampler's padding (indices dealt twice to even out the ranks) can be told."""
    indices = list(iter(sampler))
    for start in range(0, len(indices), batch_size):
        chunk = indices[start:start + batch_size]
        positions = [sampler.rank + (start + k) * sampler.num_replicas
                     for k in range(len(chunk))]
        yield positions, chunk


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8, help="per rank")
    parser.add_argument("--samples", type=int, default=0, help="the first N samples (0: all)")
    parser.add_argument("--commit-every", type=int, default=4, help="batches")
    parser.add_argument("--batch-ms", type=float, default=0,
                        help="extra time per batch (so that one can act mid-epoch)")
    parser.add_argument("--lr", type=float, default=0.02, help="scaled by the number of ranks")
    parser.add_argument("--data", default=DATA)
    args = parser.parse_args()

    hvd.init()  # in an elastic job: waits for the driver to place this worker in a generation
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    features, labels = load_digits(args.data, args.samples)

    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(range(len(labels)), shuffle=True, seed=7)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, seen=[], pads=0,
                                   batches=0)

    def scale_lr():  # after every reset: the learning rate follows the number of ranks
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
    state.register_reset_callbacks([scale_lr])

    @hvd.elastic.run
    def train(state):
        who = "rank %d of %d pid %d" % (hvd.rank(), hvd.size(), os.getpid())
        say("start %s time %.3f" % (who, time.time()))
        first = True
        while state.epoch < args.epochs:
            for batch_idx, (positions, chunk) in enumerate(batches(state.sampler,
                                                                   args.batch_size)):
                if args.batch_ms:
                    time.sleep(args.batch_ms / 1000.0)
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(state.model(features[chunk]),
                                                         labels[chunk])
                loss.backward()
                optimizer.step()
                # Which samples the job processed in this batch, padding marked: every rank's.
                rest = len(state.sampler.remaining_indices)
                mine = torch.tensor([[i, int(p >= rest)] for i, p in zip(chunk, positions)])
                processed = hvd.allgather(mine, name="processed")
                # New lists (not in place): ObjectState saves references, as Horovod's.
                state.seen = state.seen + [i for i, pad in processed.tolist() if not pad]
                state.pads += int(processed[:, 1].sum())
                state.sampler.record_batch(batch_idx, len(chunk))
                state.batches += 1
                if first:
                    say("training %s time %.3f" % (who, time.time()))
                    first = False
                if state.batches % args.commit_every == 0:
                    state.commit()
            if hvd.rank() == 0:
                say("epoch %d indices %s pads %d"
                    % (state.epoch, ",".join(map(str, state.seen)), state.pads))
            state.epoch += 1
            state.seen, state.pads = [], 0
            state.sampler.set_epoch(state.epoch)
            state.commit()
        say("done rank %d of %d checksum %s" % (hvd.rank(), hvd.size(), checksum(state.model)))

    train(state)
    hvd.shutdown()


if __name__ == "__main__":
    main()
