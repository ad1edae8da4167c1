"""kolo.keras.callbacks: the same as kolo.tensorflow.keras.callbacks."""

from kolo.tensorflow.keras.callbacks import *  # noqa: F401,F403
from kolo.tensorflow.keras.callbacks import (BestModelCheckpoint,  # noqa: F401
                                             BroadcastGlobalVariablesCallback,
                                             LearningRateScheduleCallback,
                                             LearningRateWarmupCallback, MetricAverageCallback)
