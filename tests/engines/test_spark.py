"""kolo.spark.run on a real Spark local-cluster (two executor JVMs): results in rank order, the
ranks' output on the driver, a failing rank named, a job larger than the cluster refused within
its start timeout, a rank killed mid-training."""

from __future__ import annotations

import io
import os
import signal
import sys
import time

import pytest
from pyspark import cloudpickle

import kolo.spark

# The executors cannot import this test module: its functions travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _identity(scale, tag=None):
    import torch

    import kolo.torch as hvd
    hvd.init()
    print("rank %d of %d says %s" % (hvd.rank(), hvd.size(), tag))
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
    return dict(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
                local_size=hvd.local_size(), total=total * scale,
                extra=os.environ.get("TEST_EXTRA"))


def _train_steps(steps, die_rank=None, raise_rank=None, at=5):
    import torch

    import kolo.torch as hvd
    hvd.init()
    for step in range(steps):
        if step == at and hvd.rank() == die_rank:
            os.kill(os.getpid(), signal.SIGKILL)
        if step == at and hvd.rank() == raise_rank:
            raise ValueError("rank %d gives up at step %d" % (hvd.rank(), step))
        hvd.allreduce(torch.ones(1000), name="grad")
    return hvd.rank()


def test_two_ranks_results_in_rank_order_and_output(spark):
    out = io.StringIO()
    started = time.monotonic()
    results = kolo.spark.run(_identity, args=(2,), kwargs={"tag": "hi"}, num_proc=2,
                             env={"TEST_EXTRA": "yes"}, stdout=out, start_timeout=120)
    print("kolo.spark.run, 2 ranks: %.1f s" % (time.monotonic() - started))
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert (r["size"], r["local_size"], r["total"], r["extra"]) == (2, 2, 6.0, "yes")
        assert r["local_rank"] == r["rank"]  # both executors are on this machine
    lines = sorted(line for line in out.getvalue().splitlines() if "says" in line)
    assert lines == ["[0] rank 0 of 2 says hi", "[1] rank 1 of 2 says hi"]


def test_a_failing_rank_is_named(spark):
    started = time.monotonic()
    with pytest.raises(RuntimeError) as raised:
        kolo.spark.run(_train_steps, kwargs=dict(steps=50, raise_rank=1), num_proc=2,
                       start_timeout=120)
    message = str(raised.value)
    assert "rank 1 (Spark task" in message and "of 2 failed first" in message, message
    assert "ValueError: rank 1 gives up at step 5" in message, message
    assert isinstance(raised.value.__cause__, ValueError)
    assert time.monotonic() - started < 90


def test_more_processes_than_task_slots(spark):
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"0 of 3 tasks started within start_timeout=15 s"):
        kolo.spark.run(_identity, args=(1,), num_proc=3, start_timeout=15)
    assert time.monotonic() - started < 30
    # The cancelled job left the cluster usable.
    assert [r["rank"] for r in kolo.spark.run(_identity, args=(1,), num_proc=2)] == [0, 1]


@pytest.mark.slow
def test_a_rank_killed_mid_training_is_named(spark):
    started = time.monotonic()
    with pytest.raises(RuntimeError) as raised:
        kolo.spark.run(_train_steps, kwargs=dict(steps=100000, die_rank=1, at=20), num_proc=2,
                       start_timeout=120)
    message = str(raised.value)
    assert "rank 1 (Spark task" in message, message
    assert "killed by signal 9" in message, message
    assert "then ranks 0" in message, message  # the survivor failed too, not by a timeout
    assert time.monotonic() - started < 90


def _elastic_train(out, kill_at=None, steps=60):
    """hvd.elastic.run with a commit every 5 steps; the worker that is rank 1 at step
    `kill_at` SIGKILLs itself once."""
    import torch

    import kolo.torch as hvd
    hvd.init()
    state = hvd.elastic.TorchState(step=0, total=0.0)

    @hvd.elastic.run
    def train(state):
        while state.step < steps:
            if state.step == kill_at and hvd.rank() == 1:
                try:
                    os.close(os.open(os.path.join(out, "killed"), os.O_CREAT | os.O_EXCL))
                    os.kill(os.getpid(), signal.SIGKILL)
                except FileExistsError:
                    pass
            state.total += hvd.allreduce(torch.ones(1), op=hvd.Sum, name="one").item()
            state.step += 1
            if state.step % 5 == 0:
                state.commit()

    train(state)
    return dict(rank=hvd.rank(), size=hvd.size(), step=state.step)


def test_run_elastic_two_ranks(spark, tmp_path):
    started = time.monotonic()
    results = kolo.spark.run_elastic(_elastic_train, args=(str(tmp_path),), num_proc=2,
                                     elastic_timeout=60, start_timeout=120)
    print("kolo.spark.run_elastic, 2 ranks: %.1f s" % (time.monotonic() - started))
    assert results == [dict(rank=0, size=2, step=60), dict(rank=1, size=2, step=60)]


@pytest.mark.slow
def test_run_elastic_survives_a_killed_worker(spark, tmp_path):
    # Two tasks (the cluster's two slots); rank 1's worker SIGKILLed at step 20: its task is
    # blacklisted and rank 0 goes on alone (min_num_proc=1).
    results = kolo.spark.run_elastic(_elastic_train, args=(str(tmp_path), 20), num_proc=2,
                                     min_num_proc=1, max_num_proc=2, elastic_timeout=60,
                                     start_timeout=120)
    assert results == [dict(rank=0, size=1, step=60)]
    assert (tmp_path / "killed").exists()
