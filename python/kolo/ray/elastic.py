"""kolo's ElasticRayExecutor (Horovod 0.28.1's horovod.ray.ElasticRayExecutor) and the elastic
mode of RayExecutor (min_workers, Horovod's elastic_v2), on kolorun's elastic driver
(kolo._engine.elastic): its hosts are Ray's live nodes (RayHostDiscovery: slots = the node's
CPUs / cpus_per_slot, and GPUs / gpus_per_slot with use_gpu), and each worker it starts is a Ray
actor on its host's node that runs the training function (which uses hvd.elastic.run and calls
hvd.init(), joining the driver's next generation). A killed actor or a node that leaves costs a
reset, as a killed process does under kolorun; nodes that join get workers up to max_np.

    settings = ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=4)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    results = executor.run(train_fn)     # the values of the last generation's workers, by rank

Threading: one thread drives an executor; the driver's threads call launch() and the
discovery (docs of kolo._engine.elastic).
"""

from __future__ import annotations

import math
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Optional

import ray
import ray.exceptions
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from kolo._engine.elastic import ElasticDriverRun, ElasticOptions, Host, WorkerRequest
from kolo._engine.ranks import current_kolo_rank
from kolo.ray.worker import BaseHorovodWorker


class RayHostDiscovery:
    """Ray's live nodes as hosts (Horovod's RayHostDiscovery). A node's name is its address, or
    address-nodeid when several nodes share an address; the names stay the same while the
    executor lives."""

    def __init__(self, use_gpu: bool = False, cpus_per_slot: float = 1,
                 gpus_per_slot: float = 1) -> None:
        """Slots of a node: its CPUs / cpus_per_slot (and with use_gpu at most its GPUs /
        gpus_per_slot)."""
        self.use_gpu = use_gpu
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = gpus_per_slot
        self._names: dict[str, str] = {}  # node id: name
        self._lock = threading.Lock()

    def _name(self, node_id: str, address: str) -> str:
        """The node's stable name."""
        with self._lock:
            if node_id not in self._names:
                taken = set(self._names.values())
                self._names[node_id] = address if address not in taken else "%s-%s" % (
                    address, node_id[:8])
            return self._names[node_id]

    def hosts(self) -> list[tuple[str, str, str, int]]:
        """(name, node id, address, slots) of each live node."""
        found = []
        for node in ray.nodes():
            if not node.get("Alive", node.get("alive")):
                continue
            resources = node.get("Resources", {})
            slots = resources.get("CPU", 0) // self.cpus_per_slot
            if self.use_gpu:
                slots = min(slots, resources.get("GPU", 0) // self.gpus_per_slot)
            address = node["NodeManagerAddress"]
            found.append((self._name(node["NodeID"], address), node["NodeID"], address,
                          int(math.ceil(slots))))
        return found

    def find_available_hosts_and_slots(self) -> dict[str, int]:
        """Horovod's call: host name to slots."""
        return {name: slots for name, _, _, slots in self.hosts() if slots}


@dataclass
class ElasticSettings:
    """Horovod's ElasticSettings, the fields kolo reads. start_timeout in seconds."""

    discovery: Any = None
    min_num_proc: int = 1
    max_num_proc: Optional[int] = None
    elastic_timeout: Optional[float] = 600
    reset_limit: Optional[int] = None
    num_proc: Optional[int] = None
    verbose: int = 1
    start_timeout: Optional[float] = 30
    nics: Any = None
    cooldown_range: Optional[tuple[int, int]] = None
    ssh_identity_file: Optional[str] = None
    elastic: bool = True


class _ActorWorker:
    """A worker that is a Ray actor (kolo._engine.elastic.WorkerHandle)."""

    def __init__(self, actor: Any, ref: Any, where: str) -> None:
        """`ref`: the training call's result; `where` names the node in messages."""
        self._actor, self._ref, self._where = actor, ref, where

    def poll(self) -> Optional[tuple[int, Any, Optional[int], str]]:
        """None while the call runs; then (0, value, rank, "") or (1, None, None, why)."""
        ready, _ = ray.wait([self._ref], timeout=0)
        if not ready:
            return None
        try:
            value, rank = ray.get(self._ref)
            return 0, value, rank, ""
        except ray.exceptions.RayActorError as error:
            return 1, None, None, "its actor on node %s died: %s" % (self._where, error)
        except Exception as error:
            return 1, None, None, "raised on node %s: %s" % (self._where, error)

    def kill(self) -> None:
        """Kills the actor."""
        try:
            ray.kill(self._actor)
        except Exception:  # already gone
            pass


class _ElasticRayJob:
    """What both elastic executors share: Ray's nodes as kolorun's hosts, actors as workers."""

    def __init__(self, settings: Any, discovery: Any, use_gpu: bool, cpus: float, gpus: float,
                 env_vars: dict[str, Any]) -> None:
        """`discovery`: RayHostDiscovery, or the user's object with Horovod's
        find_available_hosts_and_slots() naming nodes by address."""
        self.settings, self.discovery = settings, discovery
        self.use_gpu, self.cpus, self.gpus = use_gpu, cpus, gpus
        self.env_vars = {k: str(v) for k, v in env_vars.items()}
        self.executable: tuple[Optional[type], list[Any], dict[str, Any]] = (None, [], {})
        self._nodes: dict[str, tuple[str, str]] = {}  # host name: node id, address

    def hosts(self) -> list[Host]:
        """kolorun's hosts now."""
        if isinstance(self.discovery, RayHostDiscovery):
            found = self.discovery.hosts()
        else:  # the user's discovery: hosts by address
            by_address = {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes()
                          if n.get("Alive", n.get("alive"))}
            found = [(h, by_address.get(h, ""), h, s)
                     for h, s in self.discovery.find_available_hosts_and_slots().items()]
        self._nodes.update({name: (node, address) for name, node, address, _ in found})
        return [Host(name, address, slots) for name, node, address, slots in found if node]

    def launch(self, fn: Callable[[Any], Any]) -> Callable[[WorkerRequest], _ActorWorker]:
        """kolorun's worker start for fn: an actor on the host's node that calls fn(executable)
        with the worker's variables set."""
        def start(request: WorkerRequest) -> _ActorWorker:
            node, address = self._nodes[request.host]
            actor: Any = ray.remote(BaseHorovodWorker).options(
                num_cpus=self.cpus, num_gpus=self.gpus if self.use_gpu else 0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
            env = dict(request.env, PYTHONUNBUFFERED="1", KOLO_DATA_ADDR=address)
            env.update(self.env_vars)
            actor.update_env_vars.remote(env)
            cls, args, kwargs = self.executable
            actor.start_executable.remote(cls, args, kwargs)
            ref = actor.execute.remote(lambda executable: (fn(executable), current_kolo_rank()))
            return _ActorWorker(actor, ref, request.host)
        return start

    def run(self, fn: Callable[[Any], Any], min_np: int, max_np: Optional[int],
            num_proc: int) -> list[Any]:
        """Runs fn(executable) as an elastic job; the last generation's values by rank.
        Raises RuntimeError with kolorun's reason when the job fails."""
        s = self.settings
        options = ElasticOptions(
            num_proc=num_proc, min_np=min_np, max_np=max_np,
            elastic_timeout=getattr(s, "elastic_timeout", None),
            reset_limit=getattr(s, "reset_limit", None),
            cooldown_range=getattr(s, "cooldown_range", None),
            start_timeout=getattr(s, "start_timeout", None))
        driver = ElasticDriverRun(options, self.hosts, self.launch(fn), "kolo.ray")
        code = driver.run()
        if code != 0:
            raise RuntimeError(driver.failure_text(code))
        return driver.values_in_rank_order()


def _warn_callbacks(callbacks: Optional[list[Callable[..., Any]]]) -> None:
    """kolo.ray has no ray_logger queue: callbacks are not called."""
    if callbacks:
        warnings.warn("kolo.ray: callbacks are not called (kolo.ray has no Horovod ray_logger); "
                      "the workers' output reaches the driver through Ray's log forwarding",
                      stacklevel=3)


class ElasticRayExecutor:
    """Horovod's ElasticRayExecutor on kolorun's elastic driver."""

    @staticmethod
    def create_settings(min_num_proc: int = 1, max_num_proc: Optional[int] = None,
                        reset_limit: Optional[int] = None, elastic_timeout: int = 600,
                        timeout_s: int = 30, ssh_identity_file: Optional[str] = None,
                        nics: Any = None, min_np: Optional[int] = None,
                        max_np: Optional[int] = None, **kwargs: Any) -> ElasticSettings:
        """Horovod's settings (min_np/max_np: its deprecated names); `discovery` is set by
        the executor. cooldown_range=(MIN, MAX) may be given as a keyword."""
        if min_np is not None:
            warnings.warn("min_np is deprecated, use min_num_proc instead", DeprecationWarning)
            min_num_proc = min_np
        if max_np is not None:
            warnings.warn("max_np is deprecated, use max_num_proc instead", DeprecationWarning)
            max_num_proc = max_np
        return ElasticSettings(
            min_num_proc=min_num_proc, max_num_proc=max_num_proc, reset_limit=reset_limit,
            elastic_timeout=elastic_timeout, num_proc=min_num_proc, start_timeout=timeout_s,
            nics=nics, ssh_identity_file=ssh_identity_file,
            cooldown_range=kwargs.get("cooldown_range"),
            verbose=int(kwargs.get("verbose", 1)))

    def __init__(self, settings: ElasticSettings, use_gpu: bool = False,
                 cpus_per_slot: float = 1, gpus_per_slot: Optional[float] = None,
                 env_vars: Optional[dict[str, Any]] = None,
                 override_discovery: bool = True) -> None:
        """Horovod's arguments; raises ValueError where Horovod does."""
        if gpus_per_slot and not use_gpu:
            raise ValueError("gpus_per_slot is set, but use_gpu is False. use_gpu must be True "
                             "if gpus_per_slot is set. ")
        gpus_per_slot = gpus_per_slot or int(use_gpu)
        if use_gpu and gpus_per_slot < 1:
            raise ValueError(f"gpus_per_slot must be >= 1: Got {gpus_per_slot}.")
        if override_discovery:
            settings.discovery = RayHostDiscovery(use_gpu, cpus_per_slot, gpus_per_slot or 1)
        self.settings = settings
        self.cpus_per_slot, self.gpus_per_slot, self.use_gpu = cpus_per_slot, gpus_per_slot, use_gpu
        self.env_vars = env_vars or {}
        self._job: Optional[_ElasticRayJob] = None

    def start(self) -> None:
        """Prepares the job (Ray must be initialized); the workers start in run()."""
        if not ray.is_initialized():
            raise RuntimeError("kolo.ray: call ray.init() before ElasticRayExecutor.start()")
        self._job = _ElasticRayJob(self.settings, self.settings.discovery, self.use_gpu,
                                   self.cpus_per_slot, self.gpus_per_slot, self.env_vars)

    def run(self, worker_fn: Callable[[], Any],
            callbacks: Optional[list[Callable[..., Any]]] = None) -> list[Any]:
        """worker_fn() on every worker of the elastic job; the values of the workers of its
        last generation, in rank order. Raises RuntimeError when the job fails."""
        if self._job is None:
            raise RuntimeError("kolo.ray: call start() before run()")
        _warn_callbacks(callbacks)
        s = self.settings
        return self._job.run(lambda _: worker_fn(), s.min_num_proc, s.max_num_proc,
                             s.num_proc or s.min_num_proc)


class ElasticAdapter:
    """RayExecutor(min_workers=...)'s elastic job (Horovod's elastic_v2.ElasticAdapter)."""

    def __init__(self, settings: Any, min_workers: int, max_workers: Optional[int] = None,
                 use_gpu: bool = False, cpus_per_worker: float = 1,
                 gpus_per_worker: Optional[float] = None, override_discovery: bool = True,
                 reset_limit: Optional[int] = None,
                 cooldown_range: Optional[tuple[int, int]] = None,
                 elastic_timeout: int = 600) -> None:
        """RayExecutor's elastic arguments."""
        if override_discovery or getattr(settings, "discovery", None) is None:
            settings.discovery = RayHostDiscovery(use_gpu, cpus_per_worker, gpus_per_worker or 1)
        self.settings = settings
        self.min_workers, self.max_workers = min_workers, max_workers
        self._elastic = ElasticSettings(
            discovery=settings.discovery, min_num_proc=min_workers, max_num_proc=max_workers,
            elastic_timeout=elastic_timeout, reset_limit=reset_limit,
            cooldown_range=cooldown_range,
            start_timeout=getattr(settings, "timeout_s", None))
        self._job = _ElasticRayJob(self._elastic, settings.discovery, use_gpu, cpus_per_worker,
                                   gpus_per_worker or 1, {})

    def start(self, executable_cls: Optional[type] = None,
              executable_args: Optional[list[Any]] = None,
              executable_kwargs: Optional[dict[str, Any]] = None,
              extra_env_vars: Optional[dict[str, Any]] = None) -> None:
        """Keeps what each worker is to be made with (workers start in run())."""
        self._job.executable = (executable_cls, list(executable_args or []),
                                dict(executable_kwargs or {}))
        self._job.env_vars = {k: str(v) for k, v in (extra_env_vars or {}).items()}

    def execute(self, fn: Callable[[Any], Any],
                callbacks: Optional[list[Callable[..., Any]]] = None) -> list[Any]:
        """fn(executable) on every worker of the elastic job; the last generation's values."""
        _warn_callbacks(callbacks)
        return self._job.run(fn, self.min_workers, self.max_workers, self.min_workers)

    def run(self, fn: Callable[..., Any], args: Optional[list[Any]] = None,
            kwargs: Optional[dict[str, Any]] = None,
            callbacks: Optional[list[Callable[..., Any]]] = None) -> list[Any]:
        """fn(*args, **kwargs) on every worker of the elastic job; the last generation's
        values."""
        call_args, call_kwargs = list(args or []), dict(kwargs or {})
        return self.execute(lambda _: fn(*call_args, **call_kwargs), callbacks)

    def run_remote(self, fn: Callable[..., Any]) -> list[Any]:
        """Not in elastic mode, as in Horovod."""
        raise NotImplementedError("ObjectRefs cannot be returned from Elastic runs as the "
                                  "workers are ephemeral")

    def shutdown(self) -> None:
        """Nothing outlives run()."""

