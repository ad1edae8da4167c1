"""kolo.tensorflow: Horovod's TensorFlow API (horovod.tensorflow) on kolo.

    import kolo.tensorflow as hvd        # instead of: import horovod.tensorflow as hvd

Same names, arguments and semantics, for TensorFlow 2 with Keras 3 (and tf-keras); what kolo
does not support raises with a message saying so. See README.md, "TensorFlow and Keras", and
docs/TENSORFLOW.md for the deliberate differences from Horovod.
"""

from kolo.common.errors import HorovodInternalError, HostsUpdatedInterrupt, KoloError
from kolo.tensorflow import elastic  # noqa: F401  (hvd.elastic, as in Horovod)
from kolo.tensorflow import util  # noqa: F401  (hvd.util, as in Horovod)
from kolo.tensorflow.collectives import (allreduce, grouped_allreduce, grouped_reducescatter,
                                         reducescatter)
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.functions import (BroadcastGlobalVariablesHook, allgather_object,
                                       broadcast_global_variables, broadcast_object,
                                       broadcast_object_fn, broadcast_variables)
from kolo.tensorflow.gradient_tape import DistributedGradientTape, PartialDistributedGradientTape
from kolo.tensorflow.mpi_ops import (Adasum, Average, Max, Min, Product, ProcessSet, Sum,
                                     add_process_set, allgather, alltoall, barrier, broadcast,
                                     broadcast_, ccl_built, check_num_rank_power_of_2,
                                     cross_rank, cross_size, cuda_built, ddl_built,
                                     global_process_set, gloo_built, gloo_enabled,
                                     grouped_allgather, handle_average_backwards_compatibility,
                                     init, is_homogeneous, is_initialized, join, local_rank,
                                     local_rank_op, local_size, local_size_op, mpi_built,
                                     mpi_enabled, mpi_threads_supported, nccl_built,
                                     process_set_included_op, rank, rank_op, remove_process_set,
                                     rocm_built, shutdown, size, size_op, start_timeline,
                                     stop_timeline)
from kolo.tensorflow.mpi_ops import _basics
from kolo.tensorflow.optimizer import DistributedOptimizer
from kolo.tensorflow.sync_batch_norm import SyncBatchNormalization
from kolo.tensorflow.util import _executing_eagerly  # noqa: F401  (Horovod's tests use it)

__version__ = _basics.version()
