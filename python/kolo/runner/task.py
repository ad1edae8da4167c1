"""The worker side of kolo.runner.run(): `python -m kolo.runner.task FOLDER`, started by kolorun
on every rank. Reads FOLDER/request.pkl (the caller's sys.path, the calling script when the
function is one of its own, and the pickled function and arguments), calls the function and
writes FOLDER/result.<rank>.pkl: ("ok", return value) or ("error", exception class, message,
traceback). Exits 1 after an error, so that kolorun stops the other ranks.

The rank is KOLO_RANK (kolorun's fixed jobs); in an elastic job, the rank the function's kolo
binding (kolo.torch, kolo.tensorflow) had when it returned or raised (else the error is written
as FOLDER/error.<pid>.pkl, naming the elastic worker).
"""

from __future__ import annotations

import os
import pickle
import runpy
import sys
import traceback
import types
from typing import Any, Optional

from kolo.runner import REQUEST, RESULT


def _load_main(path: str) -> None:
    """Makes the calling script's functions loadable as __main__.f: runs the script as the
    module __mp_main__ (its `if __name__ == "__main__":` part does not run), as
    multiprocessing's spawn does."""
    module = types.ModuleType("__mp_main__")
    module.__file__ = path
    sys.modules["__mp_main__"] = module
    module.__dict__.update(runpy.run_path(path, run_name="__mp_main__"))
    sys.modules["__main__"] = module


def _rank() -> Optional[int]:
    """This process's rank: KOLO_RANK, else (an elastic job) its initialized binding's."""
    if os.environ.get("KOLO_RANK") is not None:
        return int(os.environ["KOLO_RANK"])
    for name in ("kolo.torch", "kolo.tensorflow"):
        binding = sys.modules.get(name)
        if binding is not None and binding.is_initialized():
            return int(binding.rank())
    return None


def _write(path: str, data: bytes) -> None:
    """Under a temporary name first: run() never reads half a file."""
    with open(path + ".tmp", "wb") as sink:
        sink.write(data)
    os.replace(path + ".tmp", path)


def main(folder: str) -> int:
    """Runs the request of `folder` on this rank; returns the exit code."""
    with open(os.path.join(folder, REQUEST), "rb") as source:
        request = pickle.load(source)  # plain data; the function is in request["payload"]
    for entry in reversed(request["sys_path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if request["main"]:
        _load_main(request["main"])
    dumps: Any = pickle.dumps
    if request["pickler"] == "cloudpickle":
        import cloudpickle  # type: ignore[import-not-found]
        dumps = cloudpickle.dumps
    try:
        func, args, kwargs = pickle.loads(request["payload"])
        value = func(*args, **kwargs)
        data = dumps(("ok", value))
    except BaseException as error:  # noqa: BLE001  (reported to run() with the rank)
        record = ("error", type(error).__name__, str(error), traceback.format_exc(),
                  os.environ.get("KOLO_ELASTIC_WORKER_ID"))
        rank = _rank()
        name = RESULT % rank if rank is not None else "error.%d.pkl" % os.getpid()
        _write(os.path.join(folder, name), pickle.dumps(record))
        return 1
    rank = _rank()
    if rank is None:
        raise RuntimeError("kolo.runner.task: cannot tell this process's rank: no KOLO_RANK, "
                           "and no kolo binding initialized when the function returned")
    _write(os.path.join(folder, RESULT % rank), data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
