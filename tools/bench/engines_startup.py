"""Start-up time of a 2-worker job on Ray and on Spark: kolo against Horovod (docs/ENGINES.md,
"Measured"; issue 55).

One run of this script starts the engine (a local Ray instance, or a SparkSession), times it,
then times a 2-worker job twice with the library named by --lib, and prints the times, last a
JSON line. The job is the same for both libraries: import torch, `hvd.init()`, one allreduce.

  --engine ray:   ray.init(num_cpus=2) on a loopback address, then
                  RayExecutor(settings, num_workers=2, cpus_per_worker=1): `start()` plus a first
                  `run(fn)`, and a second `run(fn)` on the same workers.
  --engine spark: a SparkSession on local-cluster[2,1,1024] (--master overrides), then
                  `<lib>.spark.run(fn, num_proc=2)`: the first job and the next job.

Runs with either venv: kolo's needs PYTHONPATH=<build>/python; Horovod's needs horovod with
horovod.torch (Gloo) and the same Ray and pyspark. It binds to loopback only (Ray 2.60 turns
127.0.0.1 into the interface address, so Ray gets 127.0.0.2 as in tests/engines/conftest.py;
Spark gets 127.0.0.1), and stops what it started (ray.shutdown, spark.stop).

A driver loop, interleaved (kolo, Horovod, kolo, Horovod, ...), as run for docs/ENGINES.md:

  export OMP_NUM_THREADS=1 RAY_USAGE_STATS_ENABLED=0 SPARK_LOCAL_IP=127.0.0.1
  PY=/tmp/torch-helper-hvd/hvd-venv/bin/python    # Horovod 0.28.1 + ray 2.60.0 + pyspark 4.3.0
  for engine in ray spark; do for round in 1 2 3; do for lib in kolo horovod; do
    if [ $lib = kolo ]; then pp=/work/main/build/python; else pp=; fi
    PYTHONPATH=$pp PYSPARK_PYTHON=$PY nice -n 10 timeout 600 \\
      $PY tools/bench/engines_startup.py --engine $engine --lib $lib | tail -1
  done; done; done
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

RAY_ADDRESS = "127.0.0.2"


def job(lib):
    """The timed job on each rank: import torch, init, one allreduce (the sum of rank + 1)."""
    import importlib

    import torch
    hvd = importlib.import_module(lib + ".torch")
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
    return hvd.rank(), hvd.size(), total


def check(results):
    """Both ranks answered, in rank order, with the right sum (1 + 2)."""
    ranks = [r[0] for r in results]
    if ranks != [0, 1] or any(r[1] != 2 or r[2] != 3.0 for r in results):
        raise RuntimeError("unexpected results %r" % (results,))


def bench_ray(lib):
    import ray
    times = {}
    started = time.monotonic()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address=RAY_ADDRESS)
    times["engine_start"] = time.monotonic() - started
    try:
        if lib == "kolo":
            from kolo.ray import RayExecutor
        else:
            from horovod.ray import RayExecutor
        settings = RayExecutor.create_settings(timeout_s=120)
        executor = RayExecutor(settings, num_workers=2, cpus_per_worker=1)
        started = time.monotonic()
        executor.start()
        times["start"] = time.monotonic() - started
        check(executor.run(job, args=[lib]))
        times["start+first_job"] = time.monotonic() - started
        started = time.monotonic()
        check(executor.run(job, args=[lib]))
        times["next_job"] = time.monotonic() - started
        executor.shutdown()
    finally:
        ray.shutdown()
    return times


def bench_spark(lib, master):
    from pyspark.sql import SparkSession
    if lib == "kolo":
        import kolo.spark as spark_lib
    else:
        import horovod.spark as spark_lib
    times = {}
    started = time.monotonic()
    session = (SparkSession.builder.master(master)
               .appName("engines-startup-" + lib)
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
               .config("spark.executorEnv.OMP_NUM_THREADS", "1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    times["engine_start"] = time.monotonic() - started
    try:
        for key in ("first_job", "next_job"):
            started = time.monotonic()
            check(spark_lib.run(job, args=(lib,), num_proc=2))
            times[key] = time.monotonic() - started
    finally:
        session.stop()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["ray", "spark"], required=True)
    parser.add_argument("--lib", choices=["kolo", "horovod"], required=True)
    parser.add_argument("--master", default="local-cluster[2,1,1024]",
                        help="Spark master (default %(default)s)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if args.engine == "ray":
        times = bench_ray(args.lib)
    else:
        times = bench_spark(args.lib, args.master)
    for key, value in times.items():
        print("%s %s %-16s %6.1f s" % (args.engine, args.lib, key, value), flush=True)
    print(json.dumps(dict(engine=args.engine, lib=args.lib, load=os.getloadavg()[0],
                          **{k: round(v, 2) for k, v in times.items()})), flush=True)


if __name__ == "__main__":
    main()
