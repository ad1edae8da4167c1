"""kolo.spark: Horovod's horovod.spark.run and run_elastic on kolo (README "On Spark",
docs/ENGINES.md).

    import kolo.spark
    results = kolo.spark.run(train, num_proc=2)          # a barrier stage, one rank a task
    results = kolo.spark.run_elastic(train, num_proc=2, min_num_proc=1, max_num_proc=4)

The estimators (horovod.spark.keras.KerasEstimator, horovod.spark.torch.TorchEstimator) are not
here: docs/ENGINES.md, "Spark estimators", says why.
"""

from kolo.spark.elastic import run_elastic
from kolo.spark.runner import run

__all__ = ["run", "run_elastic"]
