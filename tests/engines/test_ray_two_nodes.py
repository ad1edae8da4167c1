"""A two-node Ray cluster on one machine: a head at 127.0.0.2 and a second node at 127.0.0.3,
two CPUs each (ray.cluster_utils). RayExecutor(num_hosts=2,
num_workers_per_host=2) places two ranks on each node; kolo sees two hosts (local ranks 0, 1 on
each, cross ranks by node), the ranks of the second node reach the others at 127.0.0.3, and
kolo's hierarchical allreduce and allgather (KOLO_HIERARCHICAL=on) run across the Ray nodes
with the right results (their timeline events prove which algorithm ran)."""

from __future__ import annotations

import glob
import os
import tempfile
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from kolo.ray import RayExecutor

pytestmark = pytest.mark.slow



@pytest.fixture
def two_nodes():
    # Two raylets with addresses of their own, as `ray start --head --node-ip-address
    # 127.0.0.2` and `ray start --address HEAD --node-ip-address 127.0.0.3` make them; Ray's
    # cluster utilities start them as this process's children and stop them with it.
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=2, node_ip_address="127.0.0.2", include_dashboard=False))
    cluster.add_node(num_cpus=2, node_ip_address="127.0.0.3")
    ray.init(address=cluster.address)
    assert sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]) == [
        "127.0.0.2", "127.0.0.3"]
    yield
    ray.shutdown()
    cluster.shutdown()


def _hierarchical_ops():
    import torch

    import kolo.torch as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    n = 1 << 18  # 1 MiB of float32
    summed = hvd.allreduce(torch.full((n,), float(rank + 1)), op=hvd.Sum, name="big")
    gathered = hvd.allgather(torch.full((n // 4,), float(rank)), name="gathered")
    expected = torch.cat([torch.full((n // 4,), float(r)) for r in range(size)])
    return dict(rank=rank, local_rank=hvd.local_rank(), local_size=hvd.local_size(),
                cross_rank=hvd.cross_rank(), cross_size=hvd.cross_size(),
                address=os.environ["KOLO_DATA_ADDR"],
                allreduce_ok=bool(torch.all(summed == size * (size + 1) / 2)),
                allgather_ok=bool(torch.equal(gathered, expected)))


def test_ranks_and_hierarchical_collectives_across_ray_nodes(two_nodes):
    timeline = os.path.join(tempfile.mkdtemp(), "t.json")
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_hosts=2,
                           num_workers_per_host=2, cpus_per_worker=1)
    started = time.monotonic()
    executor.start(extra_env_vars={"KOLO_HIERARCHICAL": "on", "KOLO_TIMELINE": timeline})
    try:
        results = executor.run(_hierarchical_ops)
        print("4 workers on 2 Ray nodes, start and run: %.1f s" % (time.monotonic() - started))
    finally:
        executor.shutdown()  # shuts kolo down in every worker: the timelines are complete
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    assert [r["local_rank"] for r in results] == [0, 1, 0, 1]
    assert [r["cross_rank"] for r in results] == [0, 0, 1, 1]
    assert all(r["local_size"] == 2 and r["cross_size"] == 2 for r in results)
    assert results[0]["address"] == results[1]["address"]
    assert results[2]["address"] == results[3]["address"]
    assert {results[0]["address"], results[2]["address"]} == {"127.0.0.2", "127.0.0.3"}
    assert all(r["allreduce_ok"] and r["allgather_ok"] for r in results), results
    events = "".join(open(path).read() for path in glob.glob(timeline[:-5] + ".rank*.json"))
    assert "HIERARCHICAL_ALLREDUCE" in events and "HIERARCHICAL_ALLGATHER" in events
