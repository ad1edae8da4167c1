"""A worker of kolorun's elastic driver that an engine runs elsewhere: kolorun starts this
program for each worker (`--launch-cmd exec` in kolo._engine.elastic), with the worker's
variables in its environment (KOLO_ELASTIC_RENDEZVOUS, KOLO_ELASTIC_WORKER_ID, the job secret,
...). It hands them to the engine's driver over the driver's Unix socket, which starts the
worker where the engine runs it (a Ray actor on the worker's node, a Spark task's process), and
waits for its end: it exits with the worker's code, so that kolorun sees the worker fail or
finish as if it were its own process. Stopped by kolorun (SIGTERM, SIGINT, SIGHUP), it asks the
driver to stop the worker, and exits once the driver says it has. When the driver goes away it
exits 1.

    python -m kolo._engine.proxy SOCKET_PATH

Threading: one thread; the signal handlers only set a flag the loop reads.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
from typing import Any, Optional

# Variables of kolorun's environment meant for the driver, not for the worker.
_DRIVER_ONLY = ("KOLOENGINE_DRIVER_TOKEN", "KOLORUN_PATH")


def worker_environment(environ: dict[str, str]) -> dict[str, str]:
    """What the worker gets: the KOLO_* and HOROVOD_* variables (those kolorun set for this
    worker among them, and the job's own settings), as kolorun forwards them to a host."""
    return {k: v for k, v in environ.items()
            if (k.startswith("KOLO_") or k.startswith("HOROVOD_")) and k not in _DRIVER_ONLY}


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    """One JSON line."""
    sock.sendall((json.dumps(message) + "\n").encode())


def main(path: str) -> int:
    """Runs one worker through the driver at `path`; returns the exit code."""
    stop_requested: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: stop_requested.append(number))
    worker_id = os.environ.get("KOLO_ELASTIC_WORKER_ID", "?")
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        _send(sock, {"token": os.environ.get("KOLOENGINE_DRIVER_TOKEN", ""),
                     "worker_id": worker_id, "host": os.environ.get("KOLO_HOSTNAME", ""),
                     "env": worker_environment(dict(os.environ))})
    except OSError as error:
        print("kolo: worker %s: cannot reach the engine's driver at %s: %s"
              % (worker_id, path, error), file=sys.stderr)
        return 1
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    buffer = b""
    stop_sent = False
    while True:
        if stop_requested and not stop_sent:
            try:
                _send(sock, {"stop": True})
            except OSError:
                return 1
            stop_sent = True
        if not selector.select(timeout=0.2):
            continue
        try:
            chunk = sock.recv(65536)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            print("kolo: worker %s: the engine's driver closed the connection"
                  % worker_id, file=sys.stderr)
            return 1
        buffer += chunk
        if b"\n" in buffer:
            reply = json.loads(buffer.split(b"\n", 1)[0])
            message: Optional[str] = reply.get("message")
            if message:
                print("kolo: worker %s: %s" % (worker_id, message), file=sys.stderr)
            return int(reply.get("exit", 1))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m kolo._engine.proxy SOCKET_PATH")
    sys.exit(main(sys.argv[1]))
