"""kolo's RayExecutor: Horovod 0.28.1's horovod.ray.RayExecutor on kolo (docs/ENGINES.md).

    from kolo.ray import RayExecutor                      # was: from horovod.ray import ...
    settings = RayExecutor.create_settings(timeout_s=30)
    executor = RayExecutor(settings, num_workers=4, cpus_per_worker=1)
    executor.start()
    results = executor.run(train_fn, args=(...))          # one value per rank, in rank order
    executor.shutdown()

Each worker is a Ray actor (kolo.ray.worker.BaseHorovodWorker) placed with a placement group
(kolo.ray.strategy). Once every actor is placed, the executor knows each one's node and orders
the ranks so that a node's ranks are consecutive, rank 0 on the first worker's node; rank 0's
actor picks a free port on its node for kolo's controller (which kolo.*.init() starts there),
and every actor gets what kolorun gives a rank (KOLO_RANK, KOLO_LOCAL_RANK, KOLO_CONTROLLER, a
fresh KOLO_SECRET, KOLO_HOSTNAME naming its node, KOLO_DATA_ADDR its node's address, and the
HOROVOD_* and torchrun variables). The user's functions then call hvd.init() in the actor.

With min_workers (Horovod's elastic_v2), the executor runs an elastic job instead
(kolo.ray.elastic). Ray client mode (ray://) is not supported: run the driver on the cluster.

Threading: one thread drives an executor.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import ray
import ray.exceptions

from kolo._engine import ranks
from kolo.ray.strategy import Placement
from kolo.ray.worker import shutdown_kolo


@dataclass
class MiniSettings:
    """The settings of a RayExecutor (Horovod's MiniSettings). timeout_s bounds kolo's start
    (KOLO_START_TIMEOUT_SECONDS) and how long run() waits for the other ranks once one failed;
    placement_group_timeout_s how long placing the workers may take; nics names the network
    interface whose address the ranks use (default: each node's Ray address)."""

    nics: Optional[set[str]] = None
    verbose: int = 1
    key: Optional[str] = None
    ssh_port: Optional[int] = None
    ssh_identity_file: Optional[str] = None
    timeout_s: int = 300
    placement_group_timeout_s: int = 100
    elastic: bool = False
    # Horovod's elastic settings object carries these; kolo.ray reads them from here too.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def start_timeout(self) -> float:
        """timeout_s, as Horovod's settings name it."""
        return float(self.timeout_s)


def _host_names(node_ids: Sequence[str], ips: Sequence[str]) -> dict[str, str]:
    """A kolo host name for each node: its address, or address-nodeid where nodes share one
    (several Ray nodes on one machine)."""
    nodes_of_ip: dict[str, set[str]] = {}
    for node, ip in zip(node_ids, ips):
        nodes_of_ip.setdefault(ip, set()).add(node)
    return {node: ip if len(nodes_of_ip[ip]) == 1 else "%s-%s" % (ip, node[:8])
            for node, ip in zip(node_ids, ips)}


def gather(refs: Sequence[Any], describe: Callable[[int], str], grace_s: float) -> list[Any]:
    """ray.get of one ref per rank, naming the rank that failed: once one failed, the others are
    waited for grace_s seconds at most; the cause is raised (a dead actor, else the rank that
    raised first), Ray's exception with a note naming its rank, the ranks that failed after it
    and those that had not returned."""
    pending = {ref: rank for rank, ref in enumerate(refs)}
    results: list[Any] = [None] * len(refs)
    failures: list[tuple[int, BaseException]] = []
    deadline: Optional[float] = None
    while pending:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait)
        if not ready:
            break
        for ref in ready:
            rank = pending.pop(ref)
            try:
                results[rank] = ray.get(ref)
            except Exception as failure:  # a task error or a dead actor, Ray's types kept
                failures.append((rank, failure))
                if deadline is None:
                    deadline = time.monotonic() + grace_s
    if not failures:
        return results
    failures.sort(key=_root_cause_first)
    rank, error = failures[0]
    what = "dead" if isinstance(error, ray.exceptions.RayActorError) else "raised"
    note = "kolo.ray: %s of %d failed first (%s)" % (describe(rank), len(refs), what)
    for later, later_error in failures[1:]:
        note += "; then rank %d failed: %s" % (later, _first_line(later_error))
    if pending:
        note += "; ranks %s had not returned %g s later" % (
            ", ".join(str(r) for r in sorted(pending.values())), grace_s)
    error.add_note(note)
    raise error


def _root_cause_first(failure: tuple[int, BaseException]) -> tuple[int, float]:
    """Orders failures so that the cause comes first: dead actors (as they were seen), then
    the ranks that raised, by when they raised (the others' errors follow from it)."""
    error = failure[1]
    if isinstance(error, ray.exceptions.RayActorError):
        return 0, 0.0
    cause = getattr(error, "cause", None) or error
    return 1, float(getattr(cause, "_kolo_raised_at", float("inf")))


def _first_line(error: BaseException) -> str:
    """The line of a rank's error that says what happened (Ray's task errors start with the
    remote traceback's header)."""
    cause = getattr(error, "cause", None) or error
    lines = [line for line in str(cause).splitlines() if line.strip()]
    return "%s: %s" % (type(cause).__name__, lines[-1] if lines else "")


class RayExecutor:
    """Horovod's RayExecutor on kolo: a fixed job of Ray actors, or an elastic one with
    min_workers."""

    @classmethod
    def create_settings(cls, timeout_s: int = 30, ssh_identity_file: Optional[str] = None,
                        ssh_str: Optional[str] = None, placement_group_timeout_s: int = 100,
                        nics: Optional[set[str]] = None) -> MiniSettings:
        """Horovod's settings. ssh_* are kept for Horovod's sake (kolo starts no ssh: its
        ranks are the actors); ssh_str is written to ssh_identity_file as Horovod does."""
        if ssh_str and ssh_identity_file and not os.path.exists(ssh_identity_file):
            with open(ssh_identity_file, "w") as key_file:
                os.chmod(ssh_identity_file, 0o600)
                key_file.write(ssh_str)
        return MiniSettings(ssh_identity_file=ssh_identity_file, timeout_s=timeout_s,
                            placement_group_timeout_s=placement_group_timeout_s, nics=nics)

    def __init__(self, settings: Any, num_workers: Optional[int] = None,
                 num_hosts: Optional[int] = None, num_workers_per_host: int = 1,
                 cpus_per_worker: float = 1, use_gpu: bool = False,
                 gpus_per_worker: Optional[float] = None, use_current_placement_group: bool = True,
                 min_workers: Optional[int] = None, max_workers: Optional[int] = None,
                 reset_limit: Optional[int] = None, cooldown_range: Optional[list[int]] = None,
                 elastic_timeout: int = 600, override_discovery: bool = True) -> None:
        """Horovod's arguments: num_workers, or num_hosts x num_workers_per_host, for a fixed
        job; min_workers (and max_workers, reset_limit, cooldown_range, elastic_timeout) for
        an elastic one. Raises ValueError for a combination Horovod refuses."""
        if max_workers and (not min_workers or min_workers <= 0):
            raise ValueError("`max_workers` provided without any positive `min_workers`: "
                             "elastic jobs need a positive `min_workers`")
        if min_workers and num_workers:
            raise ValueError("both `min_workers` and `num_workers` provided: a job is elastic "
                             "(min_workers) or fixed (num_workers), not both")
        if min_workers is None and num_workers is None and num_hosts is None:
            raise ValueError("give num_workers, or num_hosts (with num_workers_per_host), or "
                             "min_workers for an elastic job")
        if num_workers is not None and num_hosts is not None:
            raise ValueError("give num_workers or num_hosts, not both")
        self.settings = settings
        self.settings.elastic = min_workers is not None
        self._sizes: dict[str, Any] = dict(num_workers=num_workers, num_hosts=num_hosts,
                           num_workers_per_host=num_workers_per_host,
                           cpus_per_worker=cpus_per_worker, use_gpu=use_gpu,
                           gpus_per_worker=gpus_per_worker or 1,
                           use_current_placement_group=use_current_placement_group)
        self._elastic_params: dict[str, Any] = dict(
            min_workers=min_workers, max_workers=max_workers, reset_limit=reset_limit,
            cooldown_range=cooldown_range, elastic_timeout=elastic_timeout,
            override_discovery=override_discovery, cpus_per_worker=cpus_per_worker,
            use_gpu=use_gpu, gpus_per_worker=gpus_per_worker)
        self._placement: Optional[Placement] = None
        self._elastic: Any = None
        self.workers: list[Any] = []
        self._describe: list[str] = []

    # -- start ------------------------------------------------------------------------------

    def start(self, executable_cls: Optional[type] = None,
              executable_args: Optional[list[Any]] = None,
              executable_kwargs: Optional[dict[str, Any]] = None,
              extra_env_vars: Optional[dict[str, Any]] = None) -> None:
        """Places the workers, gives each its rank's environment (and extra_env_vars) and
        creates executable_cls(*executable_args, **executable_kwargs) in each."""
        if ray.util.client.ray.is_connected():
            raise RuntimeError("kolo.ray: Ray client mode (ray://) is not supported; run the "
                               "driver on a node of the cluster")
        if self.settings.elastic:
            from kolo.ray.elastic import ElasticAdapter
            self._elastic = ElasticAdapter(self.settings, **self._elastic_params)
            self._elastic.start(executable_cls, executable_args, executable_kwargs,
                                extra_env_vars)
            return
        sizes = self._sizes
        self._placement = Placement(
            num_workers=sizes["num_workers"], num_hosts=sizes["num_hosts"],
            num_workers_per_host=sizes["num_workers_per_host"],
            cpus_per_worker=sizes["cpus_per_worker"], use_gpu=sizes["use_gpu"],
            gpus_per_worker=sizes["gpus_per_worker"],
            use_current_placement_group=sizes["use_current_placement_group"],
            timeout_s=self.settings.placement_group_timeout_s)
        try:
            self._start_fixed(self._placement.create_workers(), extra_env_vars or {})
            gather([w.start_executable.remote(executable_cls, executable_args,
                                              executable_kwargs) for w in self.workers],
                   self._rank_text, self.settings.timeout_s)
        except BaseException:
            self._placement.shutdown()
            self.workers = []
            raise

    def _start_fixed(self, workers: list[Any], extra_env: dict[str, Any]) -> None:
        """Orders the placed workers into ranks and sets each one's environment."""
        wait = self.settings.placement_group_timeout_s + self.settings.timeout_s
        nics = self.settings.nics
        facts = ray.get([w.execute.remote(_node_facts(nics)) for w in workers], timeout=wait)
        names = _host_names([f[0] for f in facts], [f[1] for f in facts])
        places = [ranks.Place(names[node], address) for node, address, _ in facts]
        order = ranks.contiguous_order(places)
        self.workers = [workers[i] for i in order]
        places = [places[i] for i in order]
        self._describe = ["rank %d (the actor on node %s, pid %d)" % (
            rank, places[rank].host, facts[i][2]) for rank, i in enumerate(order)]
        controller_port, store_port = ray.get(self.workers[0].free_port.remote(2), timeout=wait)
        envs = ranks.rank_environments(places, controller_port, store_port, ranks.new_secret(),
                                       ranks.new_job_id("ray"), self.settings.timeout_s)
        if self._sizes["use_gpu"]:
            _share_node_gpus(self.workers, [p.host for p in places], envs, wait)
        for env in envs:
            env.update({k: str(v) for k, v in extra_env.items()})
        ray.get([w.update_env_vars.remote(env) for w, env in zip(self.workers, envs)],
                timeout=wait)

    def _rank_text(self, rank: int) -> str:
        """Names a rank in messages."""
        return self._describe[rank] if rank < len(self._describe) else "rank %d" % rank

    # -- running ----------------------------------------------------------------------------

    def _check_started(self) -> None:
        """Raises RuntimeError unless start() ran (and shutdown() has not)."""
        if not self.workers and self._elastic is None:
            raise RuntimeError("kolo.ray: the executor has no workers: call start() first")

    def run_remote(self, fn: Callable[..., Any], args: Optional[list[Any]] = None,
                   kwargs: Optional[dict[str, Any]] = None) -> list[Any]:
        """fn(*args, **kwargs) on every worker; returns one ObjectRef per rank, in rank order."""
        if self._elastic is not None:
            return self._elastic.run_remote(fn)  # type: ignore[no-any-return]
        self._check_started()
        call_args, call_kwargs = list(args or []), dict(kwargs or {})
        return [w.execute.remote(lambda _, f=fn: f(*call_args, **call_kwargs))
                for w in self.workers]

    def run(self, fn: Callable[..., Any], args: Optional[list[Any]] = None,
            kwargs: Optional[dict[str, Any]] = None,
            callbacks: Optional[list[Callable[..., Any]]] = None) -> list[Any]:
        """fn(*args, **kwargs) on every worker; returns each rank's value in rank order. A rank
        that raises or whose actor dies makes run() raise that error, with a note naming the
        rank. (callbacks: as in Horovod's fixed executor, not called.)"""
        if self._elastic is not None:
            return self._elastic.run(fn, args, kwargs, callbacks)  # type: ignore[no-any-return]
        return gather(self.run_remote(fn, args, kwargs), self._rank_text,
                      self.settings.timeout_s)

    def execute(self, fn: Callable[[Any], Any],
                callbacks: Optional[list[Callable[..., Any]]] = None) -> list[Any]:
        """fn(executable) on every worker (the executable_cls object start() made there);
        each rank's value in rank order, failures as run()'s."""
        if self._elastic is not None:
            return self._elastic.execute(fn, callbacks)  # type: ignore[no-any-return]
        self._check_started()
        return gather([w.execute.remote(fn) for w in self.workers], self._rank_text,
                      self.settings.timeout_s)

    def execute_single(self, fn: Callable[[Any], Any]) -> Any:
        """fn(executable) on rank 0's worker only."""
        if self._elastic is not None:
            raise NotImplementedError("Elastic mode does not support execute_single. Please "
                                      "use the execute method instead")
        self._check_started()
        return gather([self.workers[0].execute.remote(fn)], self._rank_text, 0)[0]

    def shutdown(self) -> None:
        """Shuts kolo down in every worker (together, so that no rank waits for a peer that is
        gone), then kills the workers and removes their placement group."""
        if self._elastic is not None:
            self._elastic.shutdown()
            self._elastic = None
            return
        if self.workers:
            refs = [w.execute.remote(_shutdown_kolo) for w in self.workers]
            ray.wait(refs, num_returns=len(refs), timeout=self.settings.timeout_s)
        if self._placement is not None:
            self._placement.shutdown()
            self._placement = None
        self.workers = []


def _node_facts(nics: Optional[set[str]]) -> Callable[[Any], tuple[str, str, int]]:
    """A function for a worker's execute(): its node id, the address other ranks reach it at
    (the address of the first of `nics` it has, else its node's Ray address), its pid."""
    def facts(_: Any) -> tuple[str, str, int]:
        address = ranks.interface_address(nics) or ray.util.get_node_ip_address()
        return ray.get_runtime_context().get_node_id(), address, os.getpid()
    return facts


def _share_node_gpus(workers: list[Any], hosts: list[str], envs: list[dict[str, str]],
                     wait: float) -> None:
    """CUDA_VISIBLE_DEVICES of each rank: every GPU Ray gave the workers of its node (as
    Horovod does, so that CUDA sees the node's peers and may use IPC between them)."""
    gpu_ids = ray.get([w.get_gpu_ids.remote() for w in workers], timeout=wait)
    of_host: dict[str, list[int]] = {}
    for host, ids in zip(hosts, gpu_ids):
        seen = of_host.setdefault(host, [])
        seen.extend(i for i in ids if i not in seen)  # fractional GPUs: one device, once
    for host, env in zip(hosts, envs):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in of_host[host])


def _shutdown_kolo(_: Any) -> None:
    """Shuts down whichever kolo binding this worker initialized."""
    shutdown_kolo()
