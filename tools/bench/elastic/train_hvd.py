"""Horovod elastic worker for tools/bench/elastic/recovery.sh: a small MLP on fixed synthetic
data under hvd.elastic.run with hvd.elastic.TorchState, committing every --commit-every steps,
after --step-ms of simulated compute per step (the same loop as kolo-elastic-train's).

Every (re)entry into the training function prints "start rank R size S pid P host H", every
step "step N rank R size S host H" (flushed), and a rank that finishes prints "done steps N".
The bench reads these lines as they arrive (their arrival time is the measurement), so a line
is printed only after the step's allreduce completed.

  horovodrun -np 4 --min-np 2 --max-np 4 --host-discovery-script S python train_hvd.py
"""

import argparse
import os
import time

import torch
import horovod.torch as hvd


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100000)
    parser.add_argument("--commit-every", type=int, default=1)
    parser.add_argument("--step-ms", type=int, default=20)
    return parser.parse_args()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
    )
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01),
        named_parameters=model.named_parameters(),
    )
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(32, 64, generator=generator)
    labels = torch.randint(0, 10, (32,), generator=generator)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0)
    host = os.environ.get("HOROVOD_HOSTNAME", "?")

    @hvd.elastic.run
    def train(state):
        print(
            f"start rank {hvd.rank()} size {hvd.size()} pid {os.getpid()} host {host}",
            flush=True,
        )
        while state.step < args.steps:
            time.sleep(args.step_ms / 1000.0)
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()  # the allreduce: raises HorovodInternalError after a lost rank
            state.step += 1
            print(
                f"step {state.step} rank {hvd.rank()} size {hvd.size()} host {host}",
                flush=True,
            )
            if state.step % args.commit_every == 0:
                state.commit()  # raises HostsUpdatedInterrupt when the driver found hosts

    train(state)
    print(f"done steps {state.step} rank {hvd.rank()}", flush=True)


if __name__ == "__main__":
    main()
