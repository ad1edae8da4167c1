"""kolo.keras.callbacks: kolo.tensorflow.keras.callbacks with horovod.keras.callbacks'
BestModelCheckpoint, whose arguments are (monitor, verbose, mode, save_freq): no
save_weights_only, so that BestModelCheckpoint('val_acc', 1, 'max') means what it means on
Horovod."""

from __future__ import annotations

from kolo.tensorflow.keras import callbacks as _tf_callbacks
from kolo.tensorflow.keras.callbacks import (BroadcastGlobalVariablesCallback,  # noqa: F401
                                             LearningRateScheduleCallback,
                                             LearningRateWarmupCallback, MetricAverageCallback)

__all__ = ["BestModelCheckpoint", "BroadcastGlobalVariablesCallback",
           "LearningRateScheduleCallback", "LearningRateWarmupCallback", "MetricAverageCallback"]


class BestModelCheckpoint(_tf_callbacks.BestModelCheckpoint):
    """ModelCheckpoint that saves only the best model, with horovod.keras's arguments (the
    whole model is saved); filepath as in kolo.tensorflow.keras.callbacks'."""

    def __init__(self, monitor: str = "val_loss", verbose: int = 0, mode: str = "auto",
                 save_freq: str | int = "epoch", *, filepath: str | None = None) -> None:
        """horovod.keras's arguments; `filepath`: where to save (or set .filepath later)."""
        super().__init__(monitor=monitor, verbose=verbose, save_weights_only=False, mode=mode,
                         save_freq=save_freq, filepath=filepath)
