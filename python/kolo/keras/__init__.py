"""kolo.keras: the same as kolo.tensorflow.keras (Horovod's horovod.keras was its Keras
package; TensorFlow is kolo's only Keras backend).

    import kolo.keras as hvd
"""

from kolo.tensorflow.keras import *  # noqa: F401,F403
from kolo.tensorflow.keras import (DistributedOptimizer, allgather, allreduce,  # noqa: F401
                                   broadcast, broadcast_global_variables, callbacks, elastic,
                                   load_model, reducescatter)
