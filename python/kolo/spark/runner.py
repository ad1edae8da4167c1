"""kolo.spark.run: Horovod 0.28.1's horovod.spark.run on kolo (docs/ENGINES.md).

    import kolo.spark                                   # was: import horovod.spark
    results = kolo.spark.run(train, args=(lr,), num_proc=2)   # each rank's value, rank order

One Spark job whose stage runs in barrier mode: its num_proc tasks start together or not at all
(a cluster with fewer free task slots never starts some of them while others wait). Each task
runs one rank (kolo/spark/task.py): it learns every task's host from the others, orders the
ranks so that a host's are consecutive, and runs `fn` in a fresh process with that rank's kolo
environment, where `hvd.init()` joins the job (rank 0's task's host runs the controller).

This driver runs a small service the tasks connect to: it counts the tasks that started (a job
that has not all its tasks within start_timeout is cancelled, naming how many started and the
slots Spark has), writes each rank's output to `stdout`/`stderr` with a "[rank]" prefix, and
notices a task that is lost (its connection closed before it ended): the job is cancelled and
run() fails naming the rank. A rank whose function raises makes run() raise RuntimeError naming
the rank, with its traceback (the first rank to fail, in time, is the one named).

Threading: run() blocks its caller; the service's threads and the Spark job's thread end with it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import pickle
import queue
import secrets
import socket
import sys
import threading
import time
from typing import Any, Callable, Optional, TextIO

from kolo._engine import ranks

_job_numbers = itertools.count()


class _Service:
    """The driver's service: the tasks' registrations, output and ends."""

    def __init__(self, host: str, num_proc: int, token: str, stdout: TextIO, stderr: TextIO,
                 timestamps: bool) -> None:
        """Listens on `host` (the Spark driver's address)."""
        self.num_proc, self.token = num_proc, token
        self.streams = {"stdout": stdout, "stderr": stderr}
        self.timestamps = timestamps
        self.server = socket.create_server((host, 0))
        self.address = (host, self.server.getsockname()[1])
        self.lock = threading.Lock()
        self.started: set[int] = set()
        self.rank_of: dict[int, int] = {}
        self.host_of: dict[int, str] = {}
        self.lost: list[int] = []  # partitions whose connection ended before "done"
        self.changed = threading.Condition(self.lock)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        """Accepts task connections until closed."""
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        """One task's messages."""
        index, done = None, False
        with conn, conn.makefile("rb") as reader:
            for raw in reader:
                try:
                    message = json.loads(raw)
                except ValueError:
                    return
                if index is None:
                    if not secrets.compare_digest(str(message.get("token")), self.token):
                        return
                    index = int(message["index"])
                    with self.lock:
                        self.started.add(index)
                        self.changed.notify_all()
                elif message.get("event") == "rank":
                    with self.lock:
                        self.rank_of[index] = int(message["rank"])
                        self.host_of[index] = str(message["host"])
                elif message.get("event") == "done":
                    done = True
                elif "line" in message:
                    self._write(message)
        if index is not None and not done:
            with self.lock:
                if not self.closed:
                    self.lost.append(index)
                self.changed.notify_all()

    def _write(self, message: dict[str, Any]) -> None:
        """One line of a rank's output, prefixed as kolorun prefixes it."""
        prefix = "[%s] " % message["rank"]
        if self.timestamps:
            prefix = time.strftime("%a %b %d %H:%M:%S %Y") + " " + prefix
        stream = self.streams.get(message["stream"], self.streams["stderr"])
        with self.lock:
            stream.write(prefix + message["line"] + "\n")
            stream.flush()

    def describe(self, index: int) -> str:
        """Names a task's rank in messages."""
        rank = self.rank_of.get(index)
        who = ("rank %d" % rank) if rank is not None else "the rank"
        return "%s (Spark task %d on %s)" % (who, index, self.host_of.get(index, "its executor"))

    def close(self) -> None:
        """Stops listening; later losses are not failures."""
        with self.lock:
            self.closed = True
        self.server.close()


def _spark_context() -> Any:
    """The active SparkContext; raises Horovod's error when there is none."""
    import pyspark
    context = pyspark.SparkContext._active_spark_context
    if context is None:
        raise Exception("Could not find an active SparkContext, are you running in a PySpark "
                        "session?")
    return context


def _task_slots(context: Any) -> str:
    """What Spark has now, for messages: executors and default parallelism."""
    try:
        executors = len(context._jsc.sc().getExecutorMemoryStatus()) - 1
    except Exception:
        executors = -1
    return "%s executor(s), spark.default.parallelism %d" % (
        executors if executors >= 0 else "?", context.defaultParallelism)


def _run_job(context: Any, group: str, num_proc: int, job: dict[str, Any],
             out: "queue.Queue[tuple[bool, Any]]") -> None:
    """The Spark job: num_proc barrier tasks; puts (True, values) or (False, error)."""
    from kolo.spark.task import run_task
    try:
        context.setJobGroup(group, "kolo.spark.run", interruptOnCancel=True)
        rdd = context.parallelize(range(num_proc), num_proc).barrier()
        out.put((True, rdd.mapPartitions(lambda _: [run_task(job)]).collect()))
    except BaseException as error:
        out.put((False, error))


def run(fn: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: Optional[dict[str, Any]] = None,
        num_proc: Optional[int] = None, start_timeout: Optional[float] = None,
        use_mpi: Optional[bool] = None, use_gloo: Optional[bool] = None,
        extra_mpi_args: Optional[str] = None, env: Optional[dict[str, str]] = None,
        stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None, verbose: int = 1,
        nics: Optional[Any] = None, prefix_output_with_timestamp: bool = False,
        executable: Optional[str] = None) -> list[Any]:
    """Runs fn(*args, **kwargs) on num_proc ranks (default spark.default.parallelism), each in a
    Spark task; returns each rank's value in rank order. start_timeout (default
    HOROVOD_SPARK_START_TIMEOUT, else 600 s): how long the tasks may take to start. env: added
    to each rank's environment. stdout/stderr: where the ranks' output goes (default
    sys.stdout, sys.stderr). nics: the network interfaces whose address the ranks use.
    executable: the Python the ranks run (default the executors'). use_mpi, use_gloo and
    extra_mpi_args are accepted for Horovod's sake: kolo uses neither MPI nor Gloo."""
    context = _spark_context()
    if start_timeout is None:
        start_timeout = float(os.getenv("HOROVOD_SPARK_START_TIMEOUT", "600"))
    if num_proc is None:
        num_proc = context.defaultParallelism
        if verbose >= 1:
            logging.info("Running %d processes (inferred from spark.default.parallelism)...",
                         num_proc)
    elif verbose >= 1:
        logging.info("Running %d processes...", num_proc)
    if num_proc < 1:
        raise ValueError("kolo.spark.run: num_proc must be at least 1, not %d" % num_proc)
    from pyspark import cloudpickle
    token = secrets.token_hex(16)
    host = context.getConf().get("spark.driver.host") or socket.gethostname()
    service = _Service(host, num_proc, token, stdout or sys.stdout, stderr or sys.stderr,
                       prefix_output_with_timestamp)
    job = {"driver": list(service.address), "token": token, "nics": sorted(nics or []),
           "secret": ranks.new_secret(), "job_id": ranks.new_job_id("spark"),
           "start_timeout": start_timeout, "env": dict(env or {}), "executable": executable,
           "payload": cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))}
    group = "kolo.spark.run.%d.%d" % (os.getpid(), next(_job_numbers))
    outcome: queue.Queue[tuple[bool, Any]] = queue.Queue()
    thread = threading.Thread(target=_run_job, args=(context, group, num_proc, job, outcome),
                              daemon=True)
    thread.start()
    try:
        _wait_started(service, outcome, start_timeout, context)
        ok, value = _wait_ended(service, outcome)
    except BaseException:
        context.cancelJobGroup(group)
        thread.join(timeout=30)
        raise
    finally:
        service.close()
    if not ok:
        raise RuntimeError("kolo.spark.run: the Spark job failed: %s" % value) from value
    return _values(value, service)


def _wait_started(service: _Service, outcome: "queue.Queue[tuple[bool, Any]]",
                  start_timeout: float, context: Any) -> None:
    """Returns once every task has connected; raises TimeoutError after start_timeout."""
    deadline = time.monotonic() + start_timeout
    with service.lock:
        while len(service.started) < service.num_proc and outcome.empty():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    "kolo.spark.run: %d of %d tasks started within start_timeout=%g s: Spark "
                    "runs a barrier stage only when it can start all of its tasks at once, "
                    "and it has %s. Run fewer processes (num_proc), give the cluster more "
                    "task slots, or raise start_timeout"
                    % (len(service.started), service.num_proc, start_timeout,
                       _task_slots(context)))
            service.changed.wait(min(left, 0.5))


def _wait_ended(service: _Service,
                outcome: "queue.Queue[tuple[bool, Any]]") -> tuple[bool, Any]:
    """The Spark job's outcome; raises RuntimeError as soon as a task is lost."""
    while True:
        try:
            return outcome.get(timeout=0.2)
        except queue.Empty:
            pass
        with service.lock:
            lost = list(service.lost)
        if lost:
            raise RuntimeError("kolo.spark.run: %s was lost (its Spark task ended without "
                               "finishing: the executor or the task's Python worker died)"
                               % service.describe(lost[0]))


def _values(results: list[tuple[int, int, str, bytes, float]], service: _Service) -> list[Any]:
    """Each rank's value in rank order; raises RuntimeError for the first rank that failed."""
    # The cause first: a rank whose process died without a result (killed, crashed), then the
    # ranks that raised, by when they raised (the others' errors follow from it).
    failed = sorted((r for r in results if r[2] != "ok"), key=lambda r: (r[2] != "died", r[4]))
    if failed:
        rank, index, _, payload, _ = failed[0]
        error, text = pickle.loads(payload)
        service.rank_of.setdefault(index, rank)
        others = ", ".join(str(r[0]) for r in failed[1:])
        raise RuntimeError("kolo.spark.run: %s of %d failed first%s:\n%s" % (
            service.describe(index), len(results),
            " (then ranks %s)" % others if others else "", text.rstrip())) from error
    from pyspark import cloudpickle
    return [cloudpickle.loads(r[3]) for r in sorted(results, key=lambda r: r[0])]
