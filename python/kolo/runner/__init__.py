"""kolo.runner: Horovod's horovod.runner.run(), a Python function run on N ranks through kolorun:

    import kolo.runner

    def train(lr):
        import kolo.torch as hvd
        hvd.init()
        ...
        return hvd.rank(), loss

    results = kolo.runner.run(train, args=(0.1,), np=2)   # [rank 0's value, rank 1's value]

run() pickles the function and its arguments (with cloudpickle where it is installed, as
Horovod does, else with pickle: then the function must be importable, a module-level function
of an importable module or of the calling script, as for multiprocessing's spawn), starts
`kolorun -np N ... python -m kolo.runner.task DIR` and returns each rank's return value in
rank order. A rank that raises makes run() raise RuntimeError naming the rank and its error
(kolorun stops the other ranks). The function and the results travel through a temporary
folder (KOLORUN_TMPDIR chooses where it is made): on several hosts it must lie on a file
system every host shares. kolorun is found through KOLORUN_PATH, PATH, the folder of the
worker's python, or the CMake build tree the package comes from. (Neither variable starts with
KOLO_: the ranks inherit the environment, and kolo's init refuses KOLO_ names it does not
know.) docs/TORCH.md, "Horovod's
other names".

Threading: run() blocks its caller until kolorun exits; call it from one thread at a time.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["run"]

# The request run() writes and each rank's result (kolo/runner/task.py).
REQUEST = "request.pkl"
RESULT = "result.%d.pkl"


def _pickler() -> Any:
    """cloudpickle where installed (functions defined anywhere, lambdas and closures
    included), else pickle."""
    try:
        import cloudpickle  # type: ignore[import-not-found]
        return cloudpickle
    except ImportError:
        return pickle


def _main_path(func: Callable[..., Any]) -> Optional[str]:
    """The calling script, when `func` is one of its functions (pickle names it __main__.f):
    the worker loads the script as a module first, as multiprocessing's spawn does."""
    if getattr(func, "__module__", None) != "__main__":
        return None
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return os.path.abspath(path) if path else None


def _kolorun(executable: str) -> str:
    """The kolorun to start: KOLORUN_PATH, else PATH, else beside the worker's python (a
    venv's bin), else the build tree's bin/ when the package is the build tree's python/."""
    explicit = os.environ.get("KOLORUN_PATH")
    if explicit:
        return explicit
    found = shutil.which("kolorun")
    if found:
        return found
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidates = [os.path.join(os.path.dirname(executable), "kolorun"),
                  os.path.join(os.path.dirname(package_root), "bin", "kolorun")]
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(
        "kolo.runner.run: no kolorun found (looked at KOLORUN_PATH, PATH, %s); put kolorun on "
        "PATH or set KOLORUN_PATH to it" % ", ".join(candidates))


def _deprecated(old: str, new: str) -> None:
    warnings.warn("%s is deprecated, use %s instead" % (old, new), DeprecationWarning,
                  stacklevel=3)


def _launch_options(num_proc: Optional[int], min_num_proc: Optional[int],
                    max_num_proc: Optional[int], slots: Optional[int],
                    reset_limit: Optional[int], cooldown_range: Optional[Sequence[int]],
                    hosts: Optional[str], hostfile: Optional[str],
                    host_discovery_script: Optional[str], start_timeout: Optional[float],
                    ssh_port: Optional[int], ssh_identity_file: Optional[str],
                    output_filename: Optional[str]) -> list[str]:
    """kolorun's options for run()'s arguments (Horovod's names; horovodrun's meanings)."""
    options: list[str] = []
    pairs = [("-np", num_proc), ("--min-np", min_num_proc), ("--max-np", max_num_proc),
             ("--slots", slots), ("--reset-limit", reset_limit), ("-H", hosts),
             ("--hostfile", hostfile), ("--host-discovery-script", host_discovery_script),
             ("--start-timeout", start_timeout), ("-p", ssh_port),
             ("-i", ssh_identity_file), ("--output-dir", output_filename)]
    for flag, value in pairs:
        if value is not None:
            options += [flag, str(value)]
    if cooldown_range is not None:
        low, high = cooldown_range
        options += ["--blacklist-cooldown-range", str(low), str(high)]
    return options


def _read_results(folder: str) -> tuple[dict[int, tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What the ranks wrote (task.py): the records by rank (("ok", value) or ("error", ...)),
    and the errors of elastic workers whose rank was unknown."""
    results: dict[int, tuple[Any, ...]] = {}
    unranked: list[tuple[Any, ...]] = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".pkl") or name == REQUEST:
            continue
        with open(os.path.join(folder, name), "rb") as source:
            record = pickle.load(source)
        if name.startswith("result."):
            results[int(name.split(".")[1])] = record
        else:
            unranked.append(record)
    return results, unranked


def _outcome(results: dict[int, tuple[Any, ...]], unranked: list[tuple[Any, ...]], code: int,
             expected: Optional[int], keep: Optional[int]) -> list[Any]:
    """The return values in rank order, or RuntimeError naming the ranks that failed."""
    failed = sorted(rank for rank, result in results.items() if result[0] == "error")
    if failed or unranked:
        record = results[failed[0]] if failed else unranked[0]
        _, kind, message, trace, worker = record
        who = "rank %d" % failed[0] if failed else "elastic worker %s" % worker
        if len(failed) > 1:
            who += " (and rank%s %s)" % ("s" if len(failed) > 2 else "",
                                         ", ".join(str(r) for r in failed[1:]))
        raise RuntimeError("kolo.runner.run: %s raised %s: %s\n%s" % (who, kind, message,
                                                                      trace))
    count = expected if expected is not None else (max(results) + 1 if results else 0)
    missing = [rank for rank in range(count) if rank not in results]
    if missing or code != 0 or not results:
        raise RuntimeError(
            "kolo.runner.run: %s without a result (kolorun exited with code %d)"
            % ("rank%s %s ended" % ("s" if len(missing) > 1 else "",
                                   ", ".join(str(r) for r in missing))
               if missing else "the job ended", code))
    values = [results[rank][1] for rank in sorted(results)]
    return values[:keep] if keep is not None else values


def run(func: Callable[..., Any], args: Sequence[Any] = (),
        kwargs: Optional[dict[str, Any]] = None, num_proc: int = 1,
        min_num_proc: Optional[int] = None, max_num_proc: Optional[int] = None,
        slots: Optional[int] = None, reset_limit: Optional[int] = None,
        cooldown_range: Optional[Sequence[int]] = None, hosts: Optional[str] = None,
        hostfile: Optional[str] = None, host_discovery_script: Optional[str] = None,
        start_timeout: Optional[float] = None, ssh_port: Optional[int] = None,
        ssh_identity_file: Optional[str] = None, disable_cache: Optional[bool] = None,
        output_filename: Optional[str] = None, verbose: Optional[bool] = None,
        use_gloo: Optional[bool] = None, use_mpi: Optional[bool] = None,
        mpi_args: Optional[str] = None, network_interface: Optional[str] = None,
        network_interfaces: Optional[Sequence[str]] = None,
        executable: Optional[str] = None, np: Optional[int] = None,
        min_np: Optional[int] = None, max_np: Optional[int] = None) -> list[Any]:
    """Runs `func(*args, **kwargs)` on `num_proc` ranks through kolorun and returns the list
    of their return values, rank 0's first (with min_num_proc: the first min_num_proc). The
    arguments are horovod.runner.run's (v0.28.1), mapped to kolorun's options: hosts (-H),
    hostfile, slots, ssh_port, ssh_identity_file, start_timeout, output_filename
    (--output-dir), and for an elastic job min_num_proc, max_num_proc, reset_limit,
    cooldown_range and host_discovery_script; np, min_np and max_np are the deprecated names.
    `executable` is the workers' python (default sys.executable). disable_cache, use_gloo and
    network_interface(s) have nothing to do in kolo (no launch checks to cache, one controller,
    the data plane's address found by routing or KOLO_DATA_ADDR) and are accepted; use_mpi
    raises ValueError (kolo has no MPI controller). `func` must return a picklable value.
    Raises RuntimeError naming the rank when a rank raises or ends without a result."""
    if network_interface:
        network_interfaces = network_interface.split(",")
        _deprecated("network_interface", "network_interfaces")
    if np is not None:
        num_proc = np
        _deprecated("np", "num_proc")
    if min_np is not None:
        min_num_proc = min_np
        _deprecated("min_np", "min_num_proc")
    if max_np is not None:
        max_num_proc = max_np
        _deprecated("max_np", "max_num_proc")
    if hosts is not None and hostfile is not None:
        raise ValueError("Argument hosts and hostfile only allow one provided.")
    if use_gloo and use_mpi:
        raise ValueError("Argument use_gloo and use_mpi only allow one set True.")
    if use_mpi:
        raise ValueError("kolo.runner.run: kolo has no MPI controller (its controller is "
                         "its own, over gRPC); leave use_mpi unset, or set use_gloo")
    if network_interfaces:
        warnings.warn("kolo.runner.run: network_interfaces=%s has no effect: kolo's ranks use "
                      "the interface that routes to rank 0 (KOLO_DATA_ADDR chooses an address)"
                      % list(network_interfaces), stacklevel=2)
    del disable_cache, use_gloo, mpi_args  # nothing to do in kolo (see above)
    executable = executable or sys.executable
    kolorun = _kolorun(executable)
    pickler = _pickler()
    try:
        payload = pickler.dumps((func, tuple(args), dict(kwargs or {})))
    except Exception as error:
        raise ValueError(
            "kolo.runner.run: cannot pickle the function or its arguments (%s: %s): install "
            "cloudpickle, as Horovod requires, or pass a module-level function"
            % (type(error).__name__, error)) from error
    # Plain data around the payload: the worker reads it before it can load the function.
    request = {"sys_path": list(sys.path), "main": _main_path(func),
               "pickler": pickler.__name__, "payload": payload}
    folder = tempfile.mkdtemp(prefix="kolo-runner-", dir=os.environ.get("KOLORUN_TMPDIR"))
    try:
        with open(os.path.join(folder, REQUEST), "wb") as sink:
            pickle.dump(request, sink)
        command = [kolorun] + _launch_options(
            num_proc, min_num_proc, max_num_proc, slots, reset_limit, cooldown_range, hosts,
            hostfile, host_discovery_script, start_timeout, ssh_port, ssh_identity_file,
            output_filename) + ["--", executable, "-m", "kolo.runner.task", folder]
        if verbose:
            print("kolo.runner.run: %s" % " ".join(command), file=sys.stderr, flush=True)
        code = subprocess.call(command)
        elastic = host_discovery_script is not None or min_num_proc is not None
        results, unranked = _read_results(folder)
        return _outcome(results, unranked, code, None if elastic else num_proc, min_num_proc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
