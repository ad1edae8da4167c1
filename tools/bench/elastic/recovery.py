"""One elastic scenario on Horovod, torchrun and kolo, timed the same way (driven by recovery.sh).

The scenario, per run: start a 4-worker job (hosts: one with 2 slots, two with 1), wait until
every worker has trained --warm-steps steps, SIGKILL the worker of a 1-slot host that is not rank 0,
and time (a) the kill to the first step completed by a survivor in the new membership. Then
(Horovod and kolo: their discovery scripts read a hosts file) append a host and time (b) that
moment to the first step of the worker started on it. torchrun's answer to a lost worker is to
restart all of them, so its (a) is the kill to the first step after that restart; with
--nnodes=1:1 it cannot grow, so its (b) is measured in a run of its own: --nnodes=1:2 with one
agent training, then a second agent (1 worker) started, to its worker's first step.

Every time is taken here, when the worker's line arrives through the launcher's output (the same
path for all systems). Every wait has a deadline; every process a run starts carries
ELASTIC_PEERS_BENCH_TAG in its environment, and at the end of a run the launcher's process group
and then every process with that tag are SIGKILLed (Horovod puts its workers in sessions of
their own, out of the group; they are found by the tag and killed by pid), then checked to be
gone.

Prints one JSON object per run on stdout; recovery.sh makes the table.
"""

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

# One parsed line: kind ("start" or "step"), host, rank, size, pid (start), step (step), gen.
PY_START = re.compile(
    r"start rank (\d+) size (\d+) pid (\d+) host (\S+)(?: restart (\d+))?"
)
PY_STEP = re.compile(r"step (\d+) rank (\d+) size (\d+) host (\S+)(?: restart (\d+))?")
KOLO_START = re.compile(r"\[([^\]:]+):(\d+)\] generation (\d+) rank (\d+) of (\d+) pid (\d+)")
KOLO_STEP = re.compile(r"\[([^\]:]+):(\d+)\] commit step (\d+) size (\d+)")
# examples/pytorch/elastic_train.py (kolo.torch) prints a line at each (re)start of its training
# function and one after the first batch there, none per step.
KOLO_TORCH = re.compile(r"\[([^\]:]+):(\d+)\] (start|training) rank (\d+) of (\d+) pid (\d+)")


def parse(line):
    match = KOLO_START.search(line)
    if match:
        host, slot, gen, rank, size, pid = match.groups()
        return dict(kind="start", host=host, slot=slot, gen=int(gen), rank=int(rank),
                    size=int(size), pid=int(pid))
    match = KOLO_STEP.search(line)
    if match:
        host, slot, step, size = match.groups()
        return dict(kind="step", host=host, slot=slot, step=int(step), size=int(size), gen=None)
    match = KOLO_TORCH.search(line)
    if match:
        host, slot, what, rank, size, pid = match.groups()
        return dict(kind="start" if what == "start" else "step", host=host, slot=slot,
                    rank=int(rank), size=int(size), pid=int(pid), step=None, gen=None)
    match = PY_START.search(line)
    if match:
        rank, size, pid, host, restart = match.groups()
        return dict(kind="start", host=host, gen=int(restart or 0), rank=int(rank),
                    size=int(size), pid=int(pid))
    match = PY_STEP.search(line)
    if match:
        step, rank, size, host, restart = match.groups()
        return dict(kind="step", host=host, step=int(step), rank=int(rank), size=int(size),
                    gen=int(restart or 0))
    return None


class Job:
    """A launcher process, its merged output read line by line and timestamped on arrival."""

    def __init__(self, argv, env, log_path, cwd):
        self.tag = env["ELASTIC_PEERS_BENCH_TAG"]
        self.events = []  # (arrival time, parsed line)
        self.cond = threading.Condition()
        self.log = open(log_path, "a")
        self.log.write("$ " + " ".join(argv) + "\n")
        self.log.flush()
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            now = time.time()
            line = raw.decode(errors="replace").rstrip("\n")
            self.log.write(f"{now:.6f} {line}\n")
            event = parse(line)
            if event is not None:
                with self.cond:
                    self.events.append((now, event))
                    self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, predicate, timeout, what):
        """The first (time, event) satisfying predicate; raises TimeoutError naming `what`."""
        deadline = time.time() + timeout
        seen = 0
        with self.cond:
            while True:
                for index in range(seen, len(self.events)):
                    if predicate(*self.events[index]):
                        return self.events[index]
                seen = len(self.events)
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError(f"no {what} within {timeout:.0f} s")
                if self.proc.poll() is not None and not self.reader.is_alive():
                    raise RuntimeError(f"the job ended (exit {self.proc.returncode}) before {what}")
                self.cond.wait(min(left, 0.5))

    def stop(self):
        """SIGKILLs every process that carries this job's tag, by pid; returns those left."""
        for _ in range(3):
            if self.proc.returncode is None:  # not reaped yet, so its pid is still its own
                try:  # the launcher's group (kolorun's and torchrun's workers are in it)
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            pids = tagged_pids(self.tag)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.5)
        self.reader.join(timeout=10)
        self.log.close()
        return tagged_pids(self.tag)


def tagged_pids(tag):
    needle = f"ELASTIC_PEERS_BENCH_TAG={tag}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if needle in environ.read().split(b"\0"):
                    pids.append(int(name))
        except OSError:
            pass
    return pids


def write_hosts(path, hosts):
    with open(path + ".tmp", "w") as out:
        out.write("".join(f"{host}\n" for host in hosts))
    os.replace(path + ".tmp", path)  # a discovery run never reads half a file


def discovery_script(directory, hosts_file):
    path = os.path.join(directory, "discover.sh")
    with open(path, "w") as out:
        out.write(f"#!/bin/sh\nexec cat {hosts_file}\n")
    os.chmod(path, 0o755)
    return path


def warm(job, workers, steps, step_ms, timeout):
    """Waits until `workers` distinct workers reached `steps`; returns the start events. A
    worker that prints only its first step (kolo.torch's example) is given the time instead."""
    reached = set()

    def trained(_, event):
        if event["kind"] == "step" and event["size"] == workers and (
                event["step"] is None or event["step"] >= steps):
            reached.add((event["host"], event.get("slot"), event.get("rank")))
        return len(reached) >= workers

    _, last = job.wait_for(trained, timeout, f"{workers} workers at step {steps}")
    if last["step"] is None:
        time.sleep(steps * step_ms / 1000.0)
    with job.cond:
        return [event for _, event in job.events if event["kind"] == "start"]


def time_rejoin(job, since, matches, timeout, what):
    """Seconds from `since` to the first start line, then to the first step line, that
    `matches`; and that step's event."""
    started, _ = job.wait_for(lambda t, e: t > since and e["kind"] == "start" and matches(e),
                              timeout, f"{what}: a start line")
    stepped, event = job.wait_for(lambda t, e: t > since and e["kind"] == "step" and matches(e),
                                  timeout, f"{what}: a step line")
    return started - since, stepped - since, event


@contextlib.contextmanager
def guarded(result, jobs):
    """Records a failed wait in `result` as its error, then stops every job in `jobs` (a list
    that the body may still append to), recording any process left running."""
    try:
        yield
    except (TimeoutError, RuntimeError) as error:
        result["error"] = str(error)
    finally:
        left = [pid for job in jobs for pid in job.stop()]
        if left:
            result["left_running"] = left


def kill_and_grow(args, system, run_dir, tag):
    """Horovod or kolo: kill a worker, time the survivors, add a host, time its worker."""
    hosts_file = os.path.join(run_dir, "hosts.txt")
    initial, victim_hosts, added = SYSTEM_HOSTS[system]
    write_hosts(hosts_file, initial)
    script = discovery_script(run_dir, hosts_file)
    env = job_env(args, tag, args.hvd_venv if system == "horovod" else args.torch_venv)
    common = ["--steps", "1000000", "--step-ms", str(args.step_ms),
              "--commit-every", str(args.commit_every)]
    if system == "horovod":
        argv = [os.path.join(args.hvd_venv, "bin", "horovodrun"), "-np", "4", "--min-np", "2",
                "--max-np", "4", "--host-discovery-script", script,
                os.path.join(args.hvd_venv, "bin", "python"),
                os.path.join(args.here, "train_hvd.py")] + common
    else:
        argv = [os.path.join(args.bin, "kolorun"), "-np", "4", "--min-np", "2", "--max-np", "4",
                "--host-discovery-script", script]
        if system == "kolo-torch":
            argv += [os.path.join(args.torch_venv, "bin", "python"), args.example,
                     "--epochs", "1000000", "--batch-ms", str(args.step_ms),
                     "--commit-every", str(args.commit_every)]
            env["PYTHONPATH"] = args.pythonpath
        else:
            argv += [os.path.join(args.bin, "kolo-elastic-train")] + common
    result = dict(system=system, command=" ".join(argv))
    jobs = [Job(argv, env, os.path.join(run_dir, "job.log"), run_dir)]
    job = jobs[0]
    with guarded(result, jobs):
        starts = warm(job, 4, args.warm_steps, args.step_ms, args.start_timeout)
        victims = [e for e in starts if e["host"] in victim_hosts and e["rank"] != 0]
        if not victims:
            raise RuntimeError(f"no worker of {victim_hosts} other than rank 0 in {starts}")
        victim = victims[-1]
        killed = time.time()
        os.kill(victim["pid"], signal.SIGKILL)
        result["victim"] = f"{victim['host']} rank {victim['rank']} pid {victim['pid']}"
        result["kill_to_reformed_s"], result["kill_to_step_s"], first = time_rejoin(
            job, killed, lambda e: e["size"] == 3, args.timeout, "the survivors")
        if first["step"] is None:  # no line per step: the time of 5 steps
            time.sleep(5 * args.step_ms / 1000.0)
        else:
            job.wait_for(lambda t, e: e["kind"] == "step" and e["size"] == 3
                         and e["step"] >= first["step"] + 5, args.timeout, "5 more steps on 3")
        grown = time.time()
        write_hosts(hosts_file, initial + [added])
        added_host = added.split(":")[0]
        result["add_to_start_s"], result["add_to_step_s"], _ = time_rejoin(
            job, grown, lambda e: e["host"] == added_host and e["size"] == 4, args.timeout,
            "the added host's worker")
    return result


def torchrun(args, nnodes, nproc, port, checkpoint, rdzv_id=None):
    """A torchrun command line for train_torchrun.py."""
    argv = [os.path.join(args.torch_venv, "bin", "torchrun"), f"--nnodes={nnodes}",
            f"--nproc-per-node={nproc}", "--max-restarts=3", "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}"]
    if rdzv_id:
        argv.append(f"--rdzv-id={rdzv_id}")
    return argv + [os.path.join(args.here, "train_torchrun.py"), "--checkpoint", checkpoint,
                   "--steps", "1000000", "--step-ms", str(args.step_ms),
                   "--commit-every", str(args.commit_every)]


def job_env(args, tag, venv=None):
    """The launcher's environment: ours, --env's, the run's tag, and VENV/bin first on PATH."""
    env = dict(os.environ, **args.extra_env, ELASTIC_PEERS_BENCH_TAG=tag)
    if venv:
        env["PATH"] = os.path.join(venv, "bin") + ":" + env["PATH"]
    return env


def torchrun_kill(args, run_dir, tag, port):
    """--nnodes=1:1: kill rank 3, time the first step after torchrun restarted every worker."""
    argv = torchrun(args, "1:1", 4, port, os.path.join(run_dir, "checkpoint.pt"))
    result = dict(system="torchrun", command=" ".join(argv))
    jobs = [Job(argv, job_env(args, tag, args.torch_venv), os.path.join(run_dir, "job.log"),
                run_dir)]
    with guarded(result, jobs):
        starts = warm(jobs[0], 4, args.warm_steps, args.step_ms, args.start_timeout)
        victim = [e for e in starts if e["rank"] == 3][-1]
        killed = time.time()
        os.kill(victim["pid"], signal.SIGKILL)
        result["victim"] = f"rank 3 pid {victim['pid']}"
        result["kill_to_reformed_s"], result["kill_to_step_s"], _ = time_rejoin(
            jobs[0], killed, lambda e: e["gen"] >= 1, args.timeout, "the restarted workers")
    return result


def torchrun_grow(args, run_dir, tag, port):
    """--nnodes=1:2: one agent (3 workers) trains, a second agent (1 worker) joins."""
    checkpoint = os.path.join(run_dir, "checkpoint-grow.pt")
    env = job_env(args, tag, args.torch_venv)

    def agent(nproc):
        return torchrun(args, "1:2", nproc, port, checkpoint, rdzv_id=f"grow{port}")

    result = dict(system="torchrun-grow",
                  grow_command=" ".join(agent(3)) + "; later " + " ".join(agent(1)))
    jobs = [Job(agent(3), env, os.path.join(run_dir, "job-grow.log"), run_dir)]
    with guarded(result, jobs):
        # Alone, the first agent waits out c10d's last call (30 s) for more nodes first.
        warm(jobs[0], 3, args.warm_steps, args.step_ms, args.start_timeout + 60)
        grown = time.time()
        jobs.append(Job(agent(1), env, os.path.join(run_dir, "job-grow2.log"), run_dir))
        result["add_to_start_s"], result["add_to_step_s"], _ = time_rejoin(
            jobs[1], grown, lambda e: e["size"] == 4, args.timeout, "the joining agent's worker")
    return result


# initial hosts, the hosts whose worker may be the victim, the host appended later. Horovod
# runs a worker without ssh only where the host name resolves to an address of a local interface
# (here localhost, 127.0.0.1, the machine's own name: lo's 127.0.0.2 is not one), and it
# blacklists the failed worker's whole host, so each 1-slot host has a name of its own.
SYSTEM_HOSTS = {
    "horovod": (["localhost:2", "127.0.0.1:1", "HOSTNAME:1"], {"127.0.0.1", "HOSTNAME"},
                "ADDED:1"),
    "kolo": (["localhost:2", "127.0.0.2:1", "127.0.0.3:1"], {"127.0.0.2", "127.0.0.3"},
             "127.0.0.4:1"),
}
SYSTEM_HOSTS["kolo-torch"] = SYSTEM_HOSTS["kolo"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system", choices=["horovod", "torchrun", "kolo", "kolo-torch"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the launcher's environment (repeatable)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--bin", help="kolo's build/bin")
    parser.add_argument("--hvd-venv")
    parser.add_argument("--torch-venv")
    parser.add_argument("--pythonpath", help="kolo-torch: where kolo.torch is (build/python)")
    parser.add_argument("--example", help="kolo-torch: examples/pytorch/elastic_train.py")
    parser.add_argument("--horovod-hosts", default="",
                        help="two extra local host names for Horovod: victim-side,added")
    parser.add_argument("--port", type=int, default=29611)
    parser.add_argument("--step-ms", type=int, default=20)
    parser.add_argument("--commit-every", type=int, default=1)
    parser.add_argument("--warm-steps", type=int, default=20)
    parser.add_argument("--start-timeout", type=float, default=180)
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args()
    args.here = os.path.dirname(os.path.abspath(__file__))
    args.extra_env = dict(item.split("=", 1) for item in args.env)
    if args.system == "horovod":
        own, added = args.horovod_hosts.split(",")
        initial, victims, _ = SYSTEM_HOSTS["horovod"]
        SYSTEM_HOSTS["horovod"] = ([h.replace("HOSTNAME", own) for h in initial],
                                   {h.replace("HOSTNAME", own) for h in victims}, f"{added}:1")
    for run in range(args.runs):
        run_dir = tempfile.mkdtemp(prefix=f"{args.system}-{run}-", dir=args.out)
        tag = uuid.uuid4().hex
        if args.system == "torchrun":
            port = args.port + 2 * run  # a port of the previous run may be in TIME_WAIT
            result = torchrun_kill(args, run_dir, tag, port)
            grow = torchrun_grow(args, run_dir, uuid.uuid4().hex, port + 1)
            result.update({("grow_" if k in ("error", "left_running") else "") + k: v
                           for k, v in grow.items() if k != "system"})
        else:
            result = kill_and_grow(args, args.system, run_dir, tag)
        result["env"] = " ".join(args.env)
        result["run"] = run
        result["log"] = run_dir
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
