"""A driver for test_interrupt.py, run as its own process and interrupted (SIGINT) mid-job:

    python interrupted_driver.py MODE PID_FOLDER [RAY_ADDRESS]

MODE: `ray` (RayExecutor, 2 workers, on the Ray cluster at RAY_ADDRESS), `ray-elastic`
(ElasticRayExecutor, 2 workers, same), `spark` (kolo.spark.run, 2 ranks, on its own Spark
local-cluster). Every rank writes its pid to PID_FOLDER/rank.<pid> and trains until it is
stopped; the driver prints "running" once both ranks have.
"""

import os
import sys
import time


def train(folder):
    import torch

    import kolo.torch as hvd
    hvd.init()
    with open(os.path.join(folder, "rank.%d" % os.getpid()), "w") as out:
        out.write(str(hvd.rank()))
    while True:
        hvd.allreduce(torch.ones(1000), name="grad")
        time.sleep(0.01)


def wait_running(folder):
    while len([f for f in os.listdir(folder) if f.startswith("rank.")]) < 2:
        time.sleep(0.2)
    print("running", flush=True)


def main():
    mode, folder = sys.argv[1], sys.argv[2]
    import threading
    threading.Thread(target=wait_running, args=(folder,), daemon=True).start()
    if mode.startswith("ray"):
        import ray
        ray.init(address=sys.argv[3])
        if mode == "ray":
            from kolo.ray import RayExecutor
            executor = RayExecutor(RayExecutor.create_settings(), num_workers=2)
            executor.start()
            executor.run(train, args=[folder])
        else:
            from kolo.ray import ElasticRayExecutor
            settings = ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=2)
            executor = ElasticRayExecutor(settings, cpus_per_slot=1)
            executor.start()
            executor.run(lambda: train(folder))
    else:
        from pyspark import cloudpickle
        from pyspark.sql import SparkSession

        import kolo.spark
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        (SparkSession.builder.master("local-cluster[2,1,1024]")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false")
         .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
         .getOrCreate())
        kolo.spark.run(train, args=(folder,), num_proc=2)


if __name__ == "__main__":
    main()
