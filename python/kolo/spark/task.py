"""The Spark side of kolo.spark.run (runner.py): what each barrier task does, and the process
it starts for its rank.

A task (one per rank, all started together by Spark's barrier mode) connects to the driver's
service, learns the other tasks' hosts through BarrierTaskContext.allGather (rank 0's task adds
two ports free on its host: kolo's controller and torch's store), orders the ranks so that a
host's ranks are consecutive, and starts a fresh Python process with that rank's kolo
environment, which runs the user's function (`python -m kolo.spark.task RESULT_PATH`, the
function on its stdin). The process's output goes to the driver line by line; its result (or
its error) comes back as the task's value. The process dies with the task (parent-death signal),
so a task Spark kills takes its rank with it.

Threading: run_task runs on the Python worker's task thread, with two threads copying the
child's output; main() is the child's only thread.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Optional

from kolo._engine import ranks


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the task's process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(1)


class _DriverLink:
    """The task's connection to the driver's service: JSON lines, one writer at a time."""

    def __init__(self, address: tuple[str, int], hello: dict[str, Any]) -> None:
        """Connects and says who this task is."""
        self._sock = socket.create_connection(address, timeout=60)
        self._sock.settimeout(None)
        self._lock = threading.Lock()
        self.send(hello)

    def send(self, message: dict[str, Any]) -> None:
        """One message; a driver that is gone is not this task's failure."""
        data = (json.dumps(message) + "\n").encode()
        with self._lock:
            try:
                self._sock.sendall(data)
            except OSError:
                pass

    def close(self) -> None:
        """Closes the connection."""
        self._sock.close()


def _forward(stream: Any, link: _DriverLink, rank: Any, name: str) -> None:
    """Sends each line of the child's `stream` to the driver."""
    for raw in iter(stream.readline, b""):
        link.send({"rank": rank, "stream": name,
                   "line": raw.decode(errors="replace").rstrip("\n")})


def _places(gathered: list[str]) -> tuple[list[ranks.Place], list[int]]:
    """Every task's place (by partition) and rank 0's two ports, from allGather's messages."""
    infos = [json.loads(m) for m in gathered]
    return [ranks.Place(i["host"], i["address"]) for i in infos], infos[0]["ports"]


def run_task(job: dict[str, Any]) -> tuple[int, int, str, bytes, float]:
    """One barrier task of job (runner.py's description): (rank, partition, status, payload,
    the time fn returned or raised, or its process ended without a result). status "ok"
    (payload: the pickled value), "error" or "died" (its process ended without a result;
    payload: a pickled (exception or None, text))."""
    from pyspark import BarrierTaskContext
    context = BarrierTaskContext.get()
    index = context.partitionId()
    link = _DriverLink(tuple(job["driver"]), {"token": job["token"], "index": index,
                                              "attempt": context.attemptNumber()})
    try:
        if context.attemptNumber() > 0:
            return _error(-1, index, "Spark retried this task: a task of the kolo job was "
                          "lost, and kolo.spark.run does not start a rank twice")
        host = context.getTaskInfos()[index].address.rsplit(":", 1)[0]
        address = ranks.interface_address(job["nics"]) or host
        ports = [ranks.free_port(), ranks.free_port()] if index == 0 else []
        places, (controller_port, store_port) = _places(context.allGather(json.dumps(
            {"host": host, "address": address, "ports": ports})))
        order = ranks.contiguous_order(places)
        rank = order.index(index)
        env = ranks.rank_environments([places[i] for i in order], controller_port, store_port,
                                      job["secret"], job["job_id"], job["start_timeout"])[rank]
        link.send({"event": "rank", "index": index, "rank": rank, "host": host})
        return _run_rank(job, rank, index, env, link)
    finally:
        link.send({"event": "done", "index": index})
        link.close()


def _run_rank(job: dict[str, Any], rank: int, index: int, rank_env: dict[str, str],
              link: _DriverLink) -> tuple[int, int, str, bytes, float]:
    """Starts the rank's process, forwards its output, returns its result."""
    env = dict(os.environ)
    for name in ranks.STALE_VARIABLES:
        env.pop(name, None)
    env.update(job["env"] or {})
    env.update(rank_env)
    env["PYTHONUNBUFFERED"] = "1"
    with tempfile.TemporaryDirectory(prefix="kolo-spark-") as folder:
        result_path = os.path.join(folder, "result.pkl")
        child, copies = start_rank_process(job, env, result_path, link, rank)
        code = child.wait()
        ended = time.time()
        for copy in copies:
            copy.join(timeout=10)
        result = read_result(result_path)
        if result is not None:
            status, payload, when, _ = result
            return rank, index, status, payload, when
    how = ("was killed by signal %d" % -code) if code < 0 else ("exited with code %d" % code)
    return _error(rank, index, "its process %s before returning a result" % how, ended, "died")


def start_rank_process(job: dict[str, Any], env: dict[str, str], result_path: str,
                       link: _DriverLink, label: Any) -> tuple[subprocess.Popen[bytes],
                                                               list[threading.Thread]]:
    """Starts `python -m kolo.spark.task RESULT_PATH` with `env` and the job's function on its
    stdin; its output lines go to the driver labelled `label` (a rank, a worker id)."""
    child = subprocess.Popen(
        [job["executable"] or sys.executable, "-m", "kolo.spark.task", result_path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        preexec_fn=_die_with_parent)
    copies = [threading.Thread(target=_forward, args=(s, link, label, n), daemon=True)
              for s, n in ((child.stdout, "stdout"), (child.stderr, "stderr"))]
    for copy in copies:
        copy.start()
    assert child.stdin is not None
    try:
        child.stdin.write(job["payload"])
        child.stdin.close()
    except BrokenPipeError:
        pass
    return child, copies


def read_result(result_path: str) -> Optional[tuple[str, bytes, float, Optional[int]]]:
    """What the rank's process wrote (main()), or None when it wrote nothing."""
    if not os.path.exists(result_path):
        return None
    with open(result_path, "rb") as source:
        return pickle.load(source)  # type: ignore[no-any-return]


def _error(rank: int, index: int, text: str, ended: Optional[float] = None,
           status: str = "error") -> tuple[int, int, str, bytes, float]:
    """A task's error value; status "died" when the rank's process ended without a result."""
    return rank, index, status, pickle.dumps((None, text)), ended or time.time()


def main(result_path: str) -> int:
    """The rank's process: reads (fn, args, kwargs) from stdin, calls fn and writes
    ("ok", pickled value, time, kolo rank) or ("error", pickled (exception, traceback text),
    the time it raised, kolo rank) to result_path.
    Exits 1 after an error (kolo shuts down at exit either way)."""
    from pyspark import cloudpickle  # what the driver pickled with
    fn, args, kwargs = cloudpickle.loads(sys.stdin.buffer.read())
    try:
        outcome = ("ok", cloudpickle.dumps(fn(*args, **kwargs)), time.time(), ranks.current_kolo_rank())
    except BaseException as error:
        when = time.time()  # the first rank to raise is the one run() names
        text = "".join(traceback.format_exception(error))
        try:
            payload = pickle.dumps((error, text))
        except Exception:  # an exception that does not pickle still names itself
            payload = pickle.dumps((None, text))
        outcome = ("error", payload, when, ranks.current_kolo_rank())
    with open(result_path + ".tmp", "wb") as sink:
        pickle.dump(outcome, sink)
    os.replace(result_path + ".tmp", result_path)
    sys.stdout.flush()
    return 0 if outcome[0] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
