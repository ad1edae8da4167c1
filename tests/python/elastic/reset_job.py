"""A training function under hvd.elastic.run that fails twice, run by ctest under kolorun as a
fixed-size 2-rank job (torch_elastic_reset_2_ranks): at step 4 every rank raises
HorovodInternalError; at step 8 only the last rank does, and the others learn it from their
next op (the failing rank leaves the job to re-form it). Each time run() must restore the last
commit (steps 3 and 6), re-form the job (shutdown, init) and sync from rank 0, and the run must
end with the weights of a run that never failed: each step's data is fixed by the step, and
every rank also computes the whole job's SGD by itself to compare. Prints "entered at step S"
at every call of the training function and "final W checksum C" at the end; exits non-zero
when a check fails, and within WATCHDOG_SECONDS whatever happens (faulthandler)."""

import faulthandler
import hashlib

import torch

import kolo.torch as hvd

STEPS, COMMIT_EVERY = 10, 3
FAILURES = {4: "every", 8: "last"}  # step -> who raises there
WATCHDOG_SECONDS = 90


def batch(step, rank):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(4, 3, generator=generator), torch.randn(4, 1, generator=generator)


def model_and_optimizer():
    torch.manual_seed(5)
    model = torch.nn.Linear(3, 1)
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)


def loss_of(model, step, rank):
    features, target = batch(step, rank)
    return torch.nn.functional.mse_loss(model(features), target)


def reference(size):
    """The job's training computed alone: each step's gradient the average of every rank's."""
    model, optimizer = model_and_optimizer()
    for step in range(STEPS):
        optimizer.zero_grad()
        sum(loss_of(model, step, r) for r in range(size)).div(size).backward()
        optimizer.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main():
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    hvd.init()
    torch.set_num_threads(1)
    model, optimizer = model_and_optimizer()
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, step=0)
    entered, failed = [], set()

    @hvd.elastic.run
    def train(state):
        print("entered at step %d" % state.step, flush=True)
        entered.append(state.step)
        while state.step < STEPS:
            who = FAILURES.get(state.step)
            if who and state.step not in failed:
                failed.add(state.step)
                if who == "every" or hvd.rank() == hvd.size() - 1:
                    raise hvd.HorovodInternalError("injected at step %d" % state.step)
            optimizer.zero_grad()
            loss_of(state.model, state.step, hvd.rank()).backward()
            optimizer.step()
            state.step += 1
            if state.step % COMMIT_EVERY == 0:
                state.commit()

    train(state)
    assert entered == [0, 3, 6], entered  # restored to the commits before each failure
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    expected = reference(hvd.size())
    assert torch.allclose(weights, expected, rtol=0, atol=1e-6), (weights, expected)
    print("final %s checksum %s" % ([round(w, 6) for w in weights.tolist()],
                                    hashlib.sha256(weights.numpy().tobytes()).hexdigest()[:16]),
          flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
