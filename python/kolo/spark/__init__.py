"""kolo.spark: Horovod's horovod.spark.run and run_elastic on kolo (README "On Spark",
docs/ENGINES.md).

    import kolo.spark
    results = kolo.spark.run(train, num_proc=2)

The estimators (horovod.spark.keras.KerasEstimator, horovod.spark.torch.TorchEstimator) are not
here: docs/ENGINES.md, "Spark estimators", says why.
"""

from kolo.spark.runner import run

__all__ = ["run"]
