"""kolo.torch: Horovod's PyTorch API (horovod.torch) on kolo.

    import kolo.torch as hvd        # instead of: import horovod.torch as hvd

Same names, arguments and semantics (elastic training too: hvd.elastic); what kolo does not
support raises with a message saying so. See README.md, "PyTorch".
"""

import torch  # noqa: F401  (loads libtorch before the native module that links it)

from kolo.torch import _C  # noqa: F401
from kolo.torch import elastic  # noqa: F401  (hvd.elastic, as in Horovod)
from kolo.torch.compression import Compression
from kolo.torch.errors import (HorovodInternalError, HostsUpdatedInterrupt, KoloError,
                               KoloValueError)
from kolo.torch.functions import (allgather, allgather_object, allreduce, alltoall,
                                  broadcast, broadcast_object, broadcast_optimizer_state,
                                  broadcast_parameters, grouped_allgather, grouped_allreduce,
                                  grouped_reducescatter, reducescatter)
from kolo.torch.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather_async,
                                allreduce_, allreduce_async, allreduce_async_, barrier,
                                broadcast_, broadcast_async, broadcast_async_, ccl_built,
                                cross_rank, cross_size, cuda_built, ddl_built,
                                gloo_built, gloo_enabled,
                                grouped_allgather_async, grouped_allreduce_,
                                grouped_allreduce_async, grouped_allreduce_async_,
                                grouped_reducescatter_async, init, is_homogeneous,
                                is_initialized, join, local_rank, local_size, mpi_built,
                                mpi_enabled, mpi_threads_supported, nccl_built, poll, rank,
                                reducescatter_async, rocm_built, shutdown, size,
                                sparse_allreduce_async,
                                start_timeline, stop_timeline, synchronize, alltoall_async)
from kolo.torch.optimizer import DistributedOptimizer
from kolo.torch.process_sets import (ProcessSet, add_process_set, global_process_set,
                                     remove_process_set)
from kolo.torch.sync_batch_norm import SyncBatchNorm
from kolo.torch import distributed as _distributed  # noqa: F401  (the "kolo" c10d backend)

__version__ = _C.version()
