"""Placing a fixed job's worker actors (Horovod's horovod.ray.strategy): a placement group of
one bundle per worker packed onto as few nodes as fit (num_workers), or one bundle per node
holding num_workers_per_host workers, each on its own node (num_hosts), or the placement group
the caller runs in. A group that cannot be placed in time (more workers than the cluster has)
fails with the resources asked for and those there are, and is removed.

Threading: called from the executor's thread only.
"""

from __future__ import annotations

from typing import Any, Optional

import ray
from ray.util.placement_group import (PlacementGroup, get_current_placement_group,
                                      placement_group, remove_placement_group)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from kolo.ray.worker import BaseHorovodWorker


def _wait_placed(group: PlacementGroup, timeout_s: float, workers: int) -> None:
    """Waits until Ray placed `group`; removes it and raises TimeoutError when it was not placed
    within timeout_s."""
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if ready:
        return
    bundles = group.bundle_specs
    remove_placement_group(group)
    raise TimeoutError(
        "kolo.ray: the placement group for %d worker(s) (bundles %s) was not placed within "
        "placement_group_timeout_s=%g s: the cluster has %s in all, %s free. Start fewer "
        "workers, ask for fewer CPUs/GPUs per worker, or add nodes"
        % (workers, bundles, timeout_s, _resources(ray.cluster_resources()),
           _resources(ray.available_resources())))


def _resources(resources: dict[str, float]) -> str:
    """CPU, GPU and memory of a Ray resource dict, for messages."""
    shown = {k: v for k, v in resources.items() if k in ("CPU", "GPU")}
    return ", ".join("%g %s" % (v, k) for k, v in sorted(shown.items())) or "nothing"


class Placement:
    """The placement group of a fixed job and the worker actors created in it."""

    def __init__(self, *, num_workers: Optional[int], num_hosts: Optional[int],
                 num_workers_per_host: int, cpus_per_worker: float, use_gpu: bool,
                 gpus_per_worker: float, use_current_placement_group: bool,
                 timeout_s: float) -> None:
        """Sizes as RayExecutor's constructor takes them; timeout_s: how long placing may take."""
        self.num_hosts = num_hosts
        self.per_host = num_workers_per_host
        self.size = int(num_workers or num_hosts * num_workers_per_host)  # type: ignore[operator]
        self.cpus = cpus_per_worker
        self.gpus = gpus_per_worker if use_gpu else 0
        self.timeout_s = timeout_s
        self.inherited = get_current_placement_group() if use_current_placement_group else None
        self.group: Optional[PlacementGroup] = None
        self.workers: list[Any] = []

    def create_workers(self) -> list[Any]:
        """Places the group and creates the workers (actor handles, in bundle order)."""
        remote_cls = ray.remote(BaseHorovodWorker)
        per_bundle = 1
        if self.inherited is not None:
            group, bundle_of = self.inherited, (lambda i: -1)
        elif self.num_hosts:
            per_bundle = self.per_host
            bundle = {"CPU": self.cpus * per_bundle}
            if self.gpus:
                bundle["GPU"] = self.gpus * per_bundle
            self.group = placement_group([dict(bundle) for _ in range(self.num_hosts)],
                                         strategy="STRICT_SPREAD")
            group, bundle_of = self.group, (lambda i: i // per_bundle)
        else:
            bundle = {"CPU": self.cpus}
            if self.gpus:
                bundle["GPU"] = self.gpus
            self.group = placement_group([dict(bundle) for _ in range(self.size)],
                                         strategy="PACK")
            group, bundle_of = self.group, (lambda i: i)
        if self.group is not None:
            _wait_placed(self.group, self.timeout_s, self.size)
        for index in range(self.size):
            strategy = PlacementGroupSchedulingStrategy(
                placement_group=group, placement_group_bundle_index=bundle_of(index),
                placement_group_capture_child_tasks=False)
            self.workers.append(remote_cls.options(
                num_cpus=self.cpus, num_gpus=self.gpus, scheduling_strategy=strategy,
            ).remote(world_rank=index, world_size=self.size))
        return self.workers

    def shutdown(self) -> None:
        """Kills the workers and removes the group this placement made."""
        for worker in self.workers:
            ray.kill(worker)
        self.workers = []
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None
