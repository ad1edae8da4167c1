"""The Ray actor that is one kolo rank (Horovod's horovod.ray.worker.BaseHorovodWorker): the
executors set the rank's variables in its environment, then run the user's functions in it,
where `hvd.init()` joins the job as kolorun's ranks do.

Threading: a Ray actor runs one method at a time.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable, Optional

import ray

from kolo._engine import ranks
from kolo._engine.ranks import current_kolo_rank


class BaseHorovodWorker:
    """One rank: `execute(fn)` calls fn(executable) in this process."""

    executable: Any = None

    def __init__(self, world_rank: int = 0, world_size: int = 1) -> None:
        """Rank and size as Horovod's worker sets them at creation; the executor sets the rest
        (update_env_vars) once every worker's node is known."""
        for name in ranks.STALE_VARIABLES:
            os.environ.pop(name, None)
        os.environ["HOROVOD_RANK"] = str(world_rank)
        os.environ["HOROVOD_SIZE"] = str(world_size)

    def node_id(self) -> str:
        """The Ray node this actor runs on."""
        return str(ray.get_runtime_context().get_node_id())

    def node_ip(self) -> str:
        """The address of that node (where the other ranks reach this one)."""
        return str(ray.util.get_node_ip_address())

    def hostname(self) -> str:
        """This machine's host name."""
        return socket.gethostname()

    def pid(self) -> int:
        """This actor's process id."""
        return os.getpid()

    def free_port(self, count: int = 1) -> list[int]:
        """`count` different TCP ports free on this node (the controller's, torch's store's)."""
        ports: list[int] = []
        while len(ports) < count:
            port = ranks.free_port()
            if port not in ports:
                ports.append(port)
        return ports

    def get_gpu_ids(self) -> list[int]:
        """The CUDA devices Ray gave this actor."""
        return [int(i) for i in ray.get_gpu_ids()]

    def update_env_vars(self, env_vars: dict[str, Any]) -> None:
        """Sets these variables in this process's environment."""
        os.environ.update({k: str(v) for k, v in env_vars.items()})

    def env_vars(self) -> dict[str, str]:
        """This process's environment."""
        return dict(os.environ)

    def start_executable(self, executable_cls: Optional[type] = None,
                         executable_args: Optional[list[Any]] = None,
                         executable_kwargs: Optional[dict[str, Any]] = None) -> None:
        """Makes `executable_cls(*args, **kwargs)` the object execute() passes to functions."""
        if executable_cls:
            self.executable = executable_cls(*(executable_args or []),
                                             **(executable_kwargs or {}))

    def execute(self, func: Callable[[Any], Any]) -> Any:
        """Calls func(executable) here and returns its value. When it raises, kolo is shut
        down in this process first, as when a rank's process exits with the error under
        kolorun: the other ranks' ops then fail at once, naming this rank, instead of waiting
        for its next op."""
        try:
            return func(self.executable)
        except BaseException as error:
            # When it raised, for run() to name the rank that failed first: the shutdown below
            # makes the other ranks raise too, and their errors may reach the driver first.
            error._kolo_raised_at = time.time()  # type: ignore[attr-defined]
            shutdown_kolo()
            raise

    def kolo_rank(self) -> Optional[int]:
        """The rank this process has in kolo now (an elastic job renumbers), or None when no
        kolo binding is initialized."""
        return current_kolo_rank()


def shutdown_kolo() -> None:
    """Shuts down whichever kolo binding this process initialized."""
    import sys
    for name in ("kolo.torch", "kolo.tensorflow"):
        binding = sys.modules.get(name)
        if binding is not None and binding.is_initialized():
            try:
                binding.shutdown()
            except Exception:  # the job was already broken; the caller has the first error
                pass
