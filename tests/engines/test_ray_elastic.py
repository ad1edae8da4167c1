"""kolo.ray's ElasticRayExecutor (and RayExecutor with min_workers) on a Ray cluster of
one-CPU nodes made with ray.cluster_utils (several raylets at 127.0.0.2): kolorun's elastic
driver with Ray's live nodes as its hosts. One job goes through a worker actor SIGKILLed (a
reset: the survivors go on), a node added (the job grows to max_num_proc at its next commit)
and a node removed (a reset again); every worker of the last generation ends with the same weights.
"""

from __future__ import annotations

import hashlib
import os
import signal
import tempfile
import threading
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from conftest import RAY_ADDRESS
from kolo.ray import ElasticRayExecutor, RayExecutor

pytestmark = pytest.mark.slow


def _elastic_train(out, kill_at):
    """Commits every 5 steps; logs each generation's size; the worker that is rank 1 at step
    `kill_at` SIGKILLs itself once; stops when the test writes out/stop."""
    import torch

    import kolo.torch as hvd
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, optimizer, step=0)

    @hvd.elastic.run
    def train(state):
        with open(os.path.join(out, "log"), "a") as log:
            log.write("size %d rank %d step %d\n" % (hvd.size(), hvd.rank(), state.step))
        while True:
            stop = torch.tensor([float(hvd.rank() == 0 and os.path.exists(
                os.path.join(out, "stop")))])
            if hvd.allreduce(stop, op=hvd.Max, name="stop").item():
                return
            if state.step == kill_at and hvd.rank() == 1:
                try:
                    os.close(os.open(os.path.join(out, "killed"), os.O_CREAT | os.O_EXCL))
                    os.kill(os.getpid(), signal.SIGKILL)
                except FileExistsError:
                    pass
            x = torch.full((4, 8), float(state.step % 7))
            optimizer.zero_grad()
            ((model(x) - 1.0) ** 2).mean().backward()
            optimizer.step()
            state.step += 1
            if state.step % 5 == 0:
                state.commit()
            time.sleep(0.02)

    train(state)
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()[:16]
    return dict(rank=hvd.rank(), size=hvd.size(), step=state.step, weights=digest)


def _sizes(out):
    """The sizes of the generations so far, in order."""
    try:
        lines = open(os.path.join(out, "log")).read().split("\n")
    except FileNotFoundError:
        return []
    sizes = []
    for line in lines:
        if line.startswith("size ") and " rank 0 " in line:
            sizes.append(int(line.split()[1]))
    return sizes


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.2)


@pytest.fixture
def cluster():
    made = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=1, node_ip_address=RAY_ADDRESS, include_dashboard=False))
    for _ in range(2):
        made.add_node(num_cpus=1, node_ip_address=RAY_ADDRESS)
    ray.init(address=made.address)
    yield made
    ray.shutdown()
    made.shutdown()


def _drive(executor_run, cluster, out, expect):
    """Runs the job in a thread while the test steers it: `expect` lists each generation's size
    and what to do once it formed ("add" a node, "remove" the added one, "stop" the job; the
    kill at step 30 comes from the job itself)."""
    results, errors = [], []

    def job():
        try:
            results.extend(executor_run())
        except BaseException as error:  # reported by the test
            errors.append(error)

    thread = threading.Thread(target=job, daemon=True)
    started = time.monotonic()
    thread.start()
    added, timings = None, []
    try:
        for generation, (size, then) in enumerate(expect):
            _wait(lambda: len(_sizes(out)) > generation or errors, 120,
                  "generation %d (of %d ranks)" % (generation + 1, size))
            assert not errors, errors
            assert _sizes(out)[generation] == size, _sizes(out)
            timings.append(time.monotonic() - started)
            if then == "add":
                added = cluster.add_node(num_cpus=1, node_ip_address=RAY_ADDRESS)
            elif then == "remove":
                cluster.remove_node(added)
    finally:
        open(os.path.join(out, "stop"), "w").close()
        thread.join(timeout=120)
    assert not thread.is_alive(), "the job did not end after the stop file"
    assert not errors, errors
    print("elastic job: generations %s formed at %s s" % (
        _sizes(out), ", ".join("%.1f" % t for t in timings)))
    return results


def test_elastic_ray_executor_kill_add_remove(cluster):
    out = tempfile.mkdtemp()
    settings = ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=3,
                                                  elastic_timeout=60, timeout_s=60)
    settings.num_proc = 3  # start on all three nodes
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    # 3 ranks; rank 1 SIGKILLed at step 30: the 2 survivors re-form; a node added: 3; the
    # added node removed: 2.
    results = _drive(lambda: executor.run(lambda: _elastic_train(out, kill_at=30)), cluster,
                     out, [(3, None), (2, "add"), (3, "remove"), (2, None)])
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["size"] == 2 for r in results)
    assert len({(r["weights"], r["step"]) for r in results}) == 1, results
    assert os.path.exists(os.path.join(out, "killed"))


def test_ray_executor_min_workers_is_elastic(cluster):
    out = tempfile.mkdtemp()
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), min_workers=2,
                           max_workers=2, cpus_per_worker=1, elastic_timeout=60)
    executor.start()
    # 2 of the 3 nodes; rank 1 SIGKILLed at step 30: its node is blacklisted and the third
    # node's new worker joins the survivor.
    results = _drive(lambda: executor.run(_elastic_train, args=[out, 30]), cluster, out,
                     [(2, None), (2, None)])
    assert [r["rank"] for r in results] == [0, 1]
    assert len({r["weights"] for r in results}) == 1, results
    with pytest.raises(NotImplementedError):
        executor.execute_single(lambda _: 1)
    executor.shutdown()
