"""kolo.ray's RayExecutor and Ray Train's TorchTrainer on kolo's torch.distributed backend, on
a real local Ray instance (the fast set: one Ray start for the module)."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time

import pytest
import ray
import ray.exceptions

from kolo.ray import RayExecutor


class Counter:
    """An executable_cls: start() makes one in each worker."""

    def __init__(self, base, step=1):
        self.value = base
        self.step = step

    def bump(self):
        self.value += self.step
        return self.value


def _identity_and_sum(scale):
    import torch

    import kolo.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
    return dict(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
                local_size=hvd.local_size(), cross_rank=hvd.cross_rank(),
                cross_size=hvd.cross_size(), total=total * scale,
                extra=os.environ.get("TEST_EXTRA"), pid=os.getpid())


def _train_steps(steps, die_rank=None, die_at=None, raise_rank=None):
    """A loop of allreduces; `die_rank` SIGKILLs itself at step `die_at`, `raise_rank` raises."""
    import torch

    import kolo.torch as hvd
    hvd.init()
    for step in range(steps):
        if hvd.rank() == die_rank and step == die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if hvd.rank() == raise_rank and step == die_at:
            raise ValueError("rank %d gives up at step %d" % (hvd.rank(), step))
        hvd.allreduce(torch.ones(1000), name="grad")
    return hvd.rank()


def test_two_workers_run_execute_and_rank_order(ray_cluster):
    settings = RayExecutor.create_settings(timeout_s=60)
    executor = RayExecutor(settings, num_workers=2, cpus_per_worker=1)
    started = time.monotonic()
    executor.start(executable_cls=Counter, executable_args=[10], executable_kwargs={"step": 5},
                   extra_env_vars={"TEST_EXTRA": "yes"})
    try:
        results = executor.run(_identity_and_sum, args=[2])
        print("2-worker start and first run: %.1f s" % (time.monotonic() - started))
        assert [r["rank"] for r in results] == [0, 1]
        for r in results:
            assert (r["size"], r["local_size"], r["cross_size"]) == (2, 2, 1)
            assert r["local_rank"] == r["rank"] and r["cross_rank"] == 0
            assert r["total"] == 6.0 and r["extra"] == "yes"
        assert len({r["pid"] for r in results}) == 2
        # The executable object lives in each worker across calls; execute passes it.
        assert executor.execute(lambda counter: counter.bump()) == [15, 15]
        assert executor.execute_single(lambda counter: counter.bump()) == 20
        refs = executor.run_remote(lambda x: x * 3, kwargs={"x": 4})
        assert ray.get(refs) == [12, 12]
        # kolo's job survives between calls: a second run reuses the initialized ranks.
        assert [r["total"] for r in executor.run(_identity_and_sum, args=[1])] == [3.0, 3.0]
    finally:
        executor.shutdown()
    with pytest.raises(RuntimeError, match="call start"):
        executor.run(_identity_and_sum, args=[1])


def test_a_rank_that_raises_is_named(ray_cluster):
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), num_workers=2)
    executor.start()
    try:
        started = time.monotonic()
        with pytest.raises(ValueError, match="rank 1 gives up") as raised:
            executor.run(_train_steps, kwargs=dict(steps=50, raise_rank=1, die_at=5))
        elapsed = time.monotonic() - started
    finally:
        executor.shutdown()
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "kolo.ray: rank 1 (the actor on node" in notes and "failed first (raised)" in notes
    # The survivor's allreduce failed at once (rank 1's process left kolo's job).
    assert "then rank 0 failed" in notes, notes
    assert elapsed < 20, elapsed


def test_a_killed_worker_fails_the_run_naming_it(ray_cluster):
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), num_workers=2)
    executor.start()
    try:
        started = time.monotonic()
        with pytest.raises(ray.exceptions.RayActorError) as raised:
            executor.run(_train_steps, kwargs=dict(steps=10000, die_rank=1, die_at=20))
        elapsed = time.monotonic() - started
    finally:
        executor.shutdown()
    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "kolo.ray: rank 1 (the actor on node" in notes and "failed first (dead)" in notes
    # Rank 0 did not wait for a timeout: kolo failed its allreduce naming the lost rank.
    assert "then rank 0 failed" in notes and "rank 1" in notes.split("then rank 0 failed")[1]
    assert elapsed < 20, elapsed


def test_more_workers_than_the_cluster_has(ray_cluster):
    settings = RayExecutor.create_settings(placement_group_timeout_s=5)
    executor = RayExecutor(settings, num_workers=9, cpus_per_worker=1)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"9 worker\(s\).*4 CPU in all"):
        executor.start()
    assert time.monotonic() - started < 15
    # Nothing was left holding the cluster: a job that fits starts at once.
    assert ray.available_resources().get("CPU") == 4.0
    with pytest.raises(ValueError, match="num_workers or num_hosts"):
        RayExecutor(settings, num_workers=2, num_hosts=2)
    with pytest.raises(ValueError, match="min_workers"):
        RayExecutor(settings, num_workers=2, min_workers=1)


def _ddp_loop(config):
    import torch
    import torch.distributed as dist

    import ray.train.torch
    torch.manual_seed(0)
    model = ray.train.torch.prepare_model(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rank = dist.get_rank()
    for _ in range(3):
        x = torch.full((8, 4), float(rank + 1))
        loss = ((model(x) - torch.ones(8, 1)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with open(os.path.join(config["out"], "rank%d.json" % rank), "w") as out:
        json.dump({"backend": dist.get_backend(), "size": dist.get_world_size(),
                   "weights": [p.detach().flatten().tolist() for p in model.parameters()]}, out)


def _reference_weights():
    """The same 3 steps on one process: the mean of the two ranks' gradients."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        for rank in range(2):
            x = torch.full((8, 4), float(rank + 1))
            (((model(x) - torch.ones(8, 1)) ** 2).mean() / 2).backward()
        opt.step()
    return [p.detach().flatten().tolist() for p in model.parameters()]


def test_ray_train_torch_trainer_on_kolo(ray_cluster):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer
    out = tempfile.mkdtemp()
    started = time.monotonic()
    TorchTrainer(_ddp_loop, train_loop_config={"out": out},
                 scaling_config=ScalingConfig(num_workers=2),
                 torch_config=TorchConfig(backend="kolo"),
                 run_config=RunConfig(storage_path=tempfile.mkdtemp())).fit()
    print("TorchTrainer(backend='kolo'), 2 workers: %.1f s" % (time.monotonic() - started))
    ranks = [json.load(open(os.path.join(out, "rank%d.json" % r))) for r in range(2)]
    assert [r["backend"] for r in ranks] == ["kolo", "kolo"]
    assert [r["size"] for r in ranks] == [2, 2]
    expected = _reference_weights()
    for r in ranks:
        for got, want in zip(r["weights"], expected):
            assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
