"""Horovod's SyncBatchNormalization (horovod/tensorflow/sync_batch_norm.py) on kolo: a Keras
BatchNormalization whose training-time batch statistics are those of every rank's batch
together. Each rank's mean and mean of squares are averaged over the ranks (one allreduce of
both), and the variance is E[x^2] - E[x]^2 of the averages, as in Horovod: every rank's batch
weighs the same whatever its size. For Keras 3 and tf-keras (TF_USE_LEGACY_KERAS=1); Horovod's
subclasses tf-keras's layer only (it passes `fused`, which Keras 3's layer does not take)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from kolo.tensorflow.mpi_ops import Sum, _allreduce, size

_BatchNormalization: Any = tf.keras.layers.BatchNormalization


def _takes_fused() -> bool:
    """Whether this Keras's BatchNormalization has a `fused` argument (tf-keras's has)."""
    import inspect
    return "fused" in inspect.signature(_BatchNormalization.__init__).parameters


class SyncBatchNormalization(_BatchNormalization):
    """Synchronous batch normalization: in training, the statistics are the batch's over every
    rank (Horovod's). Raises ValueError for fused=True or None, as Horovod's: the fused kernel
    computes the statistics where kolo cannot reach them."""

    def __init__(self, fused: bool | None = False, **kwargs: Any) -> None:
        """`fused` must be False; the rest are BatchNormalization's arguments. The layer's
        name defaults to "sync_batch_normalization", as in Horovod."""
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        if not kwargs.get("name", None):
            kwargs["name"] = "sync_batch_normalization"
        if _takes_fused():
            kwargs["fused"] = fused
        super().__init__(**kwargs)

    def _moments(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """The batch's mean and variance over every rank (Keras calls it in training)."""
        mean, variance = super()._moments(*args, **kwargs)
        ranks = size()
        if ranks <= 1:
            return mean, variance
        mean_of_square = variance + tf.math.square(mean)
        stacked = _allreduce(tf.stack([mean, mean_of_square]), op=Sum) / ranks
        group_mean, group_mean_of_square = tf.unstack(stacked)
        return group_mean, group_mean_of_square - tf.math.square(group_mean)
