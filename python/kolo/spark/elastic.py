"""kolo.spark.run_elastic: Horovod 0.28.1's horovod.spark.run_elastic on kolorun's elastic driver
(kolo._engine.elastic, as ElasticRayExecutor; docs/ENGINES.md).

A plain (not barrier) Spark stage of max_num_proc tasks: a barrier stage fails every task when
one fails, which is what an elastic job must survive. Each task that runs is a host of one slot
to kolorun (`task<partition>.<attempt>`, as each task is a host in Horovod's elastic Spark), at
the address its executor reaches the driver from: it connects to this driver's service and waits
for orders. kolorun's discovery lists the tasks connected now; a worker kolorun starts on a task
is a fresh Python process the task spawns with the worker's variables (`python -m
kolo.spark.task`), whose output comes to the driver prefixed with the worker's id and whose end
(exit code, value, last kolo rank) goes back to kolorun through the proxy. A task that is lost
drops out of the discovery (its worker counts as failed); a task Spark retries comes back as a
new host. When kolorun's job ends the driver tells every task to finish and cancels the stage.

Threading: run_elastic() blocks its caller; the service and the driver run threads beside it.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable, Optional, TextIO

from kolo._engine import ranks
from kolo._engine.elastic import ElasticDriverRun, ElasticOptions, Host, WorkerRequest
from kolo.spark.runner import _job_numbers, _Service, _spark_context


class _ElasticService(_Service):
    """The driver's service for elastic tasks: hosts, orders to tasks, workers' ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As _Service."""
        self.tasks: dict[str, tuple[socket.socket, str]] = {}  # host name: connection, address
        self.ended: dict[str, tuple[int, Any, Optional[int], str]] = {}  # worker id: outcome
        super().__init__(*args, **kwargs)

    def _serve(self, conn: socket.socket) -> None:
        """One task: its registration, its workers' output and ends, until it goes."""
        name: Optional[str] = None
        with conn, conn.makefile("rb") as reader:
            for raw in reader:
                try:
                    message = json.loads(raw)
                except ValueError:
                    break
                if name is None:
                    if not secrets.compare_digest(str(message.get("token")), self.token):
                        return
                    name = str(message["name"])
                    with self.lock:
                        self.tasks[name] = (conn, str(message["address"]))
                        self.started.add(int(message["index"]))
                        self.changed.notify_all()
                elif "line" in message:
                    self._write(message)
                elif message.get("event") == "exit":
                    self._worker_ended(message)
        if name is not None:
            with self.lock:
                self.tasks.pop(name, None)
                self.changed.notify_all()

    def _worker_ended(self, message: dict[str, Any]) -> None:
        """Keeps a worker's outcome for its handle."""
        from pyspark import cloudpickle
        value = None
        if message["code"] == 0 and message.get("payload"):
            value = cloudpickle.loads(base64.b64decode(message["payload"]))
        with self.lock:
            self.ended[message["worker"]] = (int(message["code"]), value, message.get("rank"),
                                             str(message.get("message", "")))

    def order(self, host: str, message: dict[str, Any]) -> bool:
        """Sends an order to the task that is `host`; False when it is gone."""
        with self.lock:
            task = self.tasks.get(host)
        if task is None:
            return False
        try:
            task[0].sendall((json.dumps(message) + "\n").encode())
            return True
        except OSError:
            return False

    def hosts(self) -> list[Host]:
        """kolorun's hosts: the tasks connected now."""
        with self.lock:
            return [Host(name, address, 1) for name, (_, address) in sorted(self.tasks.items())]


class _TaskWorker:
    """A worker a task runs (kolo._engine.elastic.WorkerHandle)."""

    def __init__(self, service: _ElasticService, host: str, worker_id: str) -> None:
        """Watches worker_id's end on `host`."""
        self._service, self._host, self._id = service, host, worker_id

    def poll(self) -> Optional[tuple[int, Any, Optional[int], str]]:
        """None while it runs; its outcome once the task reported it, or a failure once the
        task is gone."""
        with self._service.lock:
            if self._id in self._service.ended:
                return self._service.ended[self._id]
            if self._host not in self._service.tasks:
                return 1, None, None, "its Spark task %s was lost" % self._host
        return None

    def kill(self) -> None:
        """Asks the task to stop the worker."""
        self._service.order(self._host, {"kill": self._id})


def run_elastic(fn: Callable[..., Any], args: tuple[Any, ...] = (),
                kwargs: Optional[dict[str, Any]] = None, num_proc: Optional[int] = None,
                min_num_proc: Optional[int] = None, max_num_proc: Optional[int] = None,
                start_timeout: Optional[float] = None, elastic_timeout: Optional[float] = None,
                reset_limit: Optional[int] = None, env: Optional[dict[str, str]] = None,
                stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None,
                verbose: int = 1, nics: Optional[Any] = None,
                prefix_output_with_timestamp: bool = False, min_np: Optional[int] = None,
                max_np: Optional[int] = None) -> list[Any]:
    """Runs fn(*args, **kwargs) as an elastic job of Spark tasks (fn uses hvd.elastic.run):
    num_proc workers to start (default spark.default.parallelism), at least min_num_proc
    (default num_proc), at most max_num_proc (default num_proc). Returns the values of the last
    generation's workers in rank order; raises RuntimeError when the job fails."""
    if min_np is not None:
        min_num_proc = min_np
    if max_np is not None:
        max_num_proc = max_np
    context = _spark_context()
    num_proc = num_proc or context.defaultParallelism
    min_num_proc = min_num_proc or num_proc
    max_num_proc = max_num_proc or num_proc
    if start_timeout is None:
        start_timeout = float(os.getenv("HOROVOD_SPARK_START_TIMEOUT", "600"))
    if elastic_timeout is None:
        elastic_timeout = float(os.getenv("HOROVOD_ELASTIC_TIMEOUT", "600"))
    from pyspark import cloudpickle
    token = secrets.token_hex(16)
    host = context.getConf().get("spark.driver.host") or socket.gethostname()
    service = _ElasticService(host, max_num_proc, token, stdout or sys.stdout,
                              stderr or sys.stderr, prefix_output_with_timestamp)
    job = {"driver": list(service.address), "token": token, "nics": sorted(nics or []),
           "env": dict(env or {}), "executable": None,
           "payload": cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))}
    group = "kolo.spark.run_elastic.%d.%d" % (os.getpid(), next(_job_numbers))
    outcome: queue.Queue[tuple[bool, Any]] = queue.Queue()

    def spark_job() -> None:
        try:
            context.setJobGroup(group, "kolo.spark.run_elastic", interruptOnCancel=True)
            rdd = context.parallelize(range(max_num_proc), max_num_proc)
            outcome.put((True, rdd.mapPartitions(lambda _: [elastic_task(job)]).collect()))
        except BaseException as error:
            outcome.put((False, error))

    def launch(request: WorkerRequest) -> _TaskWorker:
        if not service.order(request.host, {"start": request.worker_id, "env": request.env}):
            raise RuntimeError("its Spark task %s is gone" % request.host)
        return _TaskWorker(service, request.host, request.worker_id)

    threading.Thread(target=spark_job, daemon=True).start()
    options = ElasticOptions(num_proc=num_proc, min_np=min_num_proc, max_np=max_num_proc,
                             elastic_timeout=elastic_timeout, reset_limit=reset_limit,
                             start_timeout=start_timeout)
    driver = ElasticDriverRun(options, service.hosts, launch, "kolo.spark")
    try:
        code = driver.run()
    finally:
        for name in [h.name for h in service.hosts()]:
            service.order(name, {"finish": True})
        context.cancelJobGroup(group)
        service.close()
    if code != 0:
        raise RuntimeError(driver.failure_text(code))
    return driver.values_in_rank_order()


def _address_towards(host: str, port: int) -> str:
    """This host's address on the route to the driver (sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, port))
        return str(probe.getsockname()[0])


def elastic_task(job: dict[str, Any]) -> int:
    """One task of run_elastic: a host for kolorun's driver until the driver says the job is
    over (or goes away). Runs the workers the driver orders, one at a time."""
    from pyspark import TaskContext

    from kolo.spark.task import _DriverLink, read_result, start_rank_process
    context = TaskContext.get()
    assert context is not None, "elastic_task runs in a Spark task"
    index, attempt = context.partitionId(), context.attemptNumber()
    driver = tuple(job["driver"])
    address = ranks.interface_address(job["nics"]) or _address_towards(*driver)
    name = "task%d.%d" % (index, attempt)
    try:
        link = _DriverLink(driver, {"token": job["token"], "index": index, "name": name,
                                    "address": address})
    except OSError:  # the job is over (its service closed) before this task ran
        return 0
    reader = link._sock.makefile("rb")
    workers: dict[str, subprocess.Popen[bytes]] = {}
    folder = tempfile.mkdtemp(prefix="kolo-spark-elastic-")
    try:
        for raw in reader:
            order = json.loads(raw)
            if "start" in order:
                worker_id = order["start"]
                env = dict(os.environ)
                for stale in ranks.STALE_VARIABLES:
                    env.pop(stale, None)
                env.update(job["env"])
                env.update(order["env"])
                env.update(KOLO_DATA_ADDR=address, PYTHONUNBUFFERED="1")
                result = os.path.join(folder, "%s.pkl" % worker_id.replace("/", "_"))
                child, copies = start_rank_process(job, env, result, link, worker_id)
                workers[worker_id] = child
                threading.Thread(target=_report, args=(link, worker_id, child, copies, result,
                                                       read_result), daemon=True).start()
            elif "kill" in order and order["kill"] in workers:
                _stop(workers[order["kill"]])
            elif "finish" in order:
                break
    finally:
        for child in workers.values():
            _stop(child)
        link.close()
    return 0


def _report(link: Any, worker_id: str, child: subprocess.Popen[bytes],
            copies: list[threading.Thread], result_path: str,
            read_result: Callable[[str], Any]) -> None:
    """Waits for a worker's process and sends its end to the driver."""
    code = child.wait()
    code = code if code >= 0 else 128 - code  # a signal, as a shell reports it
    for copy in copies:
        copy.join(timeout=10)
    result = read_result(result_path)
    message: dict[str, Any] = {"event": "exit", "worker": worker_id, "code": code,
                               "message": ""}
    if result is not None:
        status, payload, _, rank = result
        message["rank"] = rank
        if status == "ok":
            message["payload"] = base64.b64encode(payload).decode()
        else:
            import pickle
            message["message"] = "raised:\n" + pickle.loads(payload)[1].rstrip()
    elif code != 0:
        message["message"] = ("its process was killed by signal %d" % (code - 128)
                              if code > 128 else "its process exited with code %d" % code)
    link.send(message)


def _stop(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 5 s."""
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()
