"""kolo.keras.callbacks: kolo.tensorflow.keras.callbacks with horovod.keras.callbacks'
BestModelCheckpoint, whose arguments are (monitor, verbose, mode, save_freq): no
save_weights_only, so that BestModelCheckpoint('val_acc', 1, 'max') means what it means on
Horovod."""

from kolo.tensorflow.keras import callbacks as _tf_callbacks
from kolo.tensorflow.keras.callbacks import *  # noqa: F401,F403
from kolo.tensorflow.keras.callbacks import (BroadcastGlobalVariablesCallback,  # noqa: F401
                                             LearningRateScheduleCallback,
                                             LearningRateWarmupCallback, MetricAverageCallback)


class BestModelCheckpoint(_tf_callbacks.BestModelCheckpoint):
    """ModelCheckpoint that saves only the best model, with horovod.keras's arguments (the
    whole model is saved); filepath as in kolo.tensorflow.keras.callbacks'."""

    def __init__(self, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch", *,
                 filepath=None):
        super().__init__(monitor=monitor, verbose=verbose, save_weights_only=False, mode=mode,
                         save_freq=save_freq, filepath=filepath)
