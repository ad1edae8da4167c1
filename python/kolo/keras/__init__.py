"""kolo.keras: the same as kolo.tensorflow.keras (Horovod's horovod.keras was its Keras
package; TensorFlow is kolo's only Keras backend), with the names horovod.keras has beside
horovod.tensorflow.keras's: PartialDistributedOptimizer and the Adasum reduce op (which
DistributedOptimizer refuses, as Horovod's Keras optimizer does), and callbacks whose
BestModelCheckpoint takes horovod.keras's arguments.

    import kolo.keras as hvd
"""

import importlib as _importlib

from kolo.tensorflow.keras import *  # noqa: F401,F403
from kolo.tensorflow.keras import (DistributedOptimizer, PartialDistributedOptimizer,  # noqa
                                   allgather, allreduce, broadcast, broadcast_global_variables,
                                   elastic, load_model, reducescatter)
from kolo.tensorflow.mpi_ops import Adasum  # noqa: F401

# After the star import, which binds kolo.tensorflow.keras's callbacks module to the name: the
# submodule with horovod.keras.callbacks' arguments.
callbacks = _importlib.import_module("kolo.keras.callbacks")
