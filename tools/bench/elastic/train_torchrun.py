"""torchrun worker for tools/bench/elastic/recovery.sh: the same small MLP, fixed synthetic data
and --step-ms of simulated compute per step as train_hvd.py, under DistributedDataParallel
(gloo). torchrun's answer to a lost worker is to stop every worker and start them all again, so
the state survives in a checkpoint file: rank 0 writes it (atomically: a temporary file, then
rename) every --commit-every steps, and every worker loads it when it starts.

Prints "start rank R size S pid P host H restart N" once the process group is up and the
checkpoint loaded, "step N rank R size S host H restart N" after each step (flushed), and
"done steps N rank R" at the end. N after "restart" is TORCHELASTIC_RESTART_COUNT.

  torchrun --nnodes=1:1 --nproc-per-node=4 --max-restarts=3 --rdzv-backend=c10d
           --rdzv-endpoint=127.0.0.1:PORT train_torchrun.py --checkpoint FILE
"""

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="file to save and resume from")
    parser.add_argument("--steps", type=int, default=100000)
    parser.add_argument("--commit-every", type=int, default=1)
    parser.add_argument("--step-ms", type=int, default=20)
    return parser.parse_args()


def save(path, model, optimizer, step):
    temporary = f"{path}.tmp{os.getpid()}"
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
        temporary,
    )
    os.replace(temporary, path)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    host = socket.gethostname()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    if os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(32, 64, generator=generator)
    labels = torch.randint(0, 10, (32,), generator=generator)
    print(
        f"start rank {rank} size {size} pid {os.getpid()} host {host} restart {restart}",
        flush=True,
    )
    while step < args.steps:
        time.sleep(args.step_ms / 1000.0)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(inputs), labels)
        loss.backward()  # DDP's allreduce
        optimizer.step()
        step += 1
        print(f"step {step} rank {rank} size {size} host {host} restart {restart}", flush=True)
        if step % args.commit_every == 0 and rank == 0:
            save(args.checkpoint, model, optimizer, step)
    print(f"done steps {step} rank {rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
