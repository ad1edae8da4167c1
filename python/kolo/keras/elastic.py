"""kolo.keras.elastic: the same as kolo.tensorflow.keras.elastic (Horovod's horovod.keras.elastic
was its Keras package's; TensorFlow is kolo's only Keras backend)."""

from kolo.tensorflow.keras.elastic import *  # noqa: F401,F403
from kolo.tensorflow.keras.elastic import (CommitStateCallback, KerasState,  # noqa: F401
                                           ObjectState, State, UpdateBatchStateCallback,
                                           UpdateEpochStateCallback, __all__, run)
