"""kolorun's elastic driver for workers an engine runs (Ray actors, Spark tasks), so that an
elastic job on an engine re-forms, blacklists and grows exactly as `kolorun --min-np ...`
does (docs/ELASTIC.md; why this and not a second driver: docs/ENGINES.md).

ElasticDriverRun.run() starts kolorun in elastic mode with two hooks:
- host discovery: `--host-discovery-script 'cat FILE'`, where a thread here writes the hosts the
  engine has now (its `hosts()` callback: Ray's live nodes, Spark's running tasks), every
  half second;
- starting a worker: `--launch-cmd exec` with kolo._engine.proxy as the program. kolorun runs
  one proxy per worker it wants, with the worker's variables; the proxy sends them over a Unix
  socket to this driver, which calls the engine's `launch(request)` to start the worker there and
  answers the proxy with the worker's exit code when it ends. kolorun stopping a proxy stops
  its worker (`handle.kill()`).

The socket (in a private 0700 folder) takes requests only with the run's token, which only
kolorun's environment carries. A worker's value is kept (by its worker id) when it exits 0.

Threading: run() blocks its caller; the discovery thread, the socket's accept thread and one
thread per worker run beside it and end with it. `launch` and `hosts` are called from those
threads.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from kolo._engine import paths


@dataclass
class WorkerRequest:
    """What kolorun asks for: worker `worker_id` ("HOST:SLOT") on host `host` (a name the
    engine's hosts() gave), with `env` (KOLO_ELASTIC_RENDEZVOUS, the secret, ...)."""

    worker_id: str
    host: str
    env: dict[str, str]


class WorkerHandle(Protocol):
    """A running worker, as the engine's launch() returns it."""

    def poll(self) -> Optional[tuple[int, Any, Optional[int], str]]:
        """None while it runs; then (exit code, value, its last kolo rank or None, message)."""

    def kill(self) -> None:
        """Stops it (idempotent)."""


@dataclass
class Host:
    """A host for kolorun's discovery: `name` (groups its workers' local ranks), `address`
    (where the other ranks reach it), `slots`."""

    name: str
    address: str
    slots: int


@dataclass
class ElasticOptions:
    """kolorun's elastic options (docs/ELASTIC.md, "kolorun's elastic options")."""

    num_proc: int
    min_np: int
    max_np: Optional[int] = None
    elastic_timeout: Optional[float] = None
    reset_limit: Optional[int] = None
    cooldown_range: Optional[tuple[int, int]] = None
    start_timeout: Optional[float] = None
    extra_args: list[str] = field(default_factory=list)


class ElasticDriverRun:
    """One elastic job: kolorun's driver, with hosts and workers from an engine."""

    def __init__(self, options: ElasticOptions, hosts: Callable[[], list[Host]],
                 launch: Callable[[WorkerRequest], WorkerHandle], name: str) -> None:
        """`hosts()` lists the engine's hosts now; `launch(request)` starts a worker; `name`
        ("kolo.ray") prefixes messages."""
        self._options = options
        self._hosts = hosts
        self._launch = launch
        self._name = name
        self._token = secrets.token_hex(16)
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._handles: dict[str, WorkerHandle] = {}
        self.results: dict[str, tuple[int, Any, Optional[int]]] = {}  # worker id: code, value, rank
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)

    # -- discovery --------------------------------------------------------------------------

    def _write_hosts(self, path: str) -> None:
        """Writes the engine's hosts as kolorun's discovery lines, atomically."""
        try:
            lines = ["%s=%s:%d" % (h.name, h.address, h.slots) for h in self._hosts() if h.slots]
        except Exception as error:  # keep the last list: kolorun keeps its hosts too
            print("%s: host discovery failed: %s" % (self._name, error), file=sys.stderr)
            return
        with open(path + ".tmp", "w") as out:
            out.write("\n".join(lines) + ("\n" if lines else ""))
        os.replace(path + ".tmp", path)

    def _discovery_loop(self, path: str) -> None:
        """Refreshes the hosts file until the job ends."""
        while not self._done.wait(0.5):
            self._write_hosts(path)

    # -- workers ----------------------------------------------------------------------------

    def _serve(self, server: socket.socket) -> None:
        """Accepts proxies until the job ends; each gets a thread."""
        server.settimeout(0.2)
        while not self._done.is_set():
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve_worker, args=(conn,), daemon=True).start()

    def _serve_worker(self, conn: socket.socket) -> None:
        """One proxy: starts its worker, stops it when asked (or when the proxy is gone), and
        answers with the worker's exit code."""
        with conn:
            reader = conn.makefile("rb")
            try:
                request = json.loads(reader.readline() or b"{}")
            except ValueError:
                return
            if not secrets.compare_digest(str(request.get("token", "")), self._token):
                return
            worker_id = str(request["worker_id"])
            try:
                handle = self._launch(WorkerRequest(worker_id, str(request["host"]),
                                                    dict(request["env"])))
            except Exception as error:
                _reply(conn, 1, "%s could not start it: %s" % (self._name, error))
                return
            with self._lock:
                self._handles[worker_id] = handle
            stop = threading.Event()
            threading.Thread(target=_watch_proxy, args=(reader, stop), daemon=True).start()
            while True:
                ended = handle.poll()
                if ended is not None:
                    break
                if stop.wait(0.05) or self._done.is_set():
                    handle.kill()
            code, value, rank, message = ended
            with self._lock:
                self._handles.pop(worker_id, None)
                self.results[worker_id] = (code, value, rank)
            _reply(conn, code, message)

    def _kill_all(self) -> None:
        """Stops every worker still running."""
        with self._lock:
            handles = list(self._handles.values())
        for handle in handles:
            handle.kill()

    # -- the job ----------------------------------------------------------------------------

    def _command(self, folder: str, socket_path: str) -> list[str]:
        """kolorun's command line."""
        o = self._options
        command = [paths.kolorun(), "-np", str(o.num_proc), "--min-np", str(o.min_np),
                   "--host-discovery-script", "cat %s" % os.path.join(folder, "hosts"),
                   "--launch-cmd", "exec"]
        if o.max_np is not None:
            command += ["--max-np", str(o.max_np)]
        if o.elastic_timeout is not None:
            command += ["--elastic-timeout", "%g" % o.elastic_timeout]
        if o.reset_limit is not None:
            command += ["--reset-limit", str(o.reset_limit)]
        if o.cooldown_range:
            command += ["--blacklist-cooldown-range"] + [str(int(x)) for x in o.cooldown_range]
        if o.start_timeout is not None:
            command += ["--start-timeout", "%g" % o.start_timeout]
        proxy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proxy.py")
        return command + o.extra_args + [sys.executable, proxy, socket_path]

    def run(self) -> int:
        """Runs the job to its end; returns kolorun's exit code. On an exception (the caller
        interrupted) kolorun is stopped, and every worker with it."""
        folder = tempfile.mkdtemp(prefix="kolo-engine-")
        socket_path = os.path.join(folder, "driver.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(socket_path)
        server.listen(64)
        self._write_hosts(os.path.join(folder, "hosts"))
        threads = [threading.Thread(target=self._discovery_loop,
                                    args=(os.path.join(folder, "hosts"),), daemon=True),
                   threading.Thread(target=self._serve, args=(server,), daemon=True)]
        for thread in threads:
            thread.start()
        env = dict(os.environ, KOLOENGINE_DRIVER_TOKEN=self._token)
        process = subprocess.Popen(self._command(folder, socket_path), env=env,
                                   stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
        relay = threading.Thread(target=self._relay_stderr, args=(process,), daemon=True)
        relay.start()
        try:
            code = process.wait()
        except BaseException:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            raise
        finally:
            self._done.set()
            self._kill_all()
            relay.join(timeout=5)
            server.close()
            for thread in threads:
                thread.join(timeout=5)
            shutil.rmtree(folder, ignore_errors=True)
        return code

    def _relay_stderr(self, process: subprocess.Popen[bytes]) -> None:
        """Copies kolorun's stderr to ours, keeping its last lines for the error message."""
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode(errors="replace")
            self._stderr_tail.append(line.rstrip("\n"))
            sys.stderr.write(line)
            sys.stderr.flush()

    def failure_text(self, code: int) -> str:
        """Why the job failed: kolorun's exit code and its last lines."""
        lines = [line for line in self._stderr_tail if line.startswith("kolorun")]
        return ("%s: the elastic job failed (kolorun exited with %d)%s"
                % (self._name, code, (":\n" + "\n".join(lines[-8:])) if lines else ""))

    def values_in_rank_order(self) -> list[Any]:
        """The values of the workers that exited 0, by their last rank."""
        done = [(rank if rank is not None else 1 << 30, worker, value)
                for worker, (code, value, rank) in self.results.items() if code == 0]
        return [value for _, _, value in sorted(done, key=lambda item: (item[0], item[1]))]


def _reply(conn: socket.socket, code: int, message: str) -> None:
    """The proxy's answer: the worker's exit code and a line for kolorun's output."""
    try:
        conn.sendall((json.dumps({"exit": code, "message": message}) + "\n").encode())
    except OSError:
        pass


def _watch_proxy(reader: Any, stop: threading.Event) -> None:
    """Sets `stop` when the proxy asks to stop the worker or goes away."""
    try:
        reader.readline()
    except OSError:
        pass
    stop.set()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when this driver dies (so kolorun, and through it every
    worker, never outlives it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(1)

