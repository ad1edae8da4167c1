"""hvd.elastic: Horovod's elastic training for PyTorch (horovod.torch.elastic) on kolo.

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            for batch_idx, batch in enumerate(loader):   # a DataLoader over state.sampler
                ...; state.sampler.record_batch(batch_idx, batch_size)
                if batch_idx % 10 == 9: state.commit()
            state.epoch += 1
            state.sampler.set_epoch(state.epoch)   # at the end of the epoch, not the start
            state.commit()

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0)
    train(state)

Launched by `kolorun --min-np/--max-np/--host-discovery-script` (docs/ELASTIC.md), the job
survives lost ranks and grows when hosts join: when an op fails because a rank was lost
(HorovodInternalError), run() restores the last commit, re-forms the job (hvd.shutdown(),
hvd.init(): the survivors are renumbered) and syncs the state from the new rank 0; when a commit
finds that hosts were added (HostsUpdatedInterrupt), every rank re-forms at that commit keeping
its state, and the new ranks take it from rank 0. In a fixed-size job the same code runs, and
a failure is restored and retried in the same job. docs/TORCH.md, "Elastic training".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kolo.common import elastic as _common
from kolo.common.elastic import ObjectState, State
from kolo.common.errors import HorovodInternalError as _CommonInternalError
from kolo.torch import _C, mpi_ops
from kolo.torch.elastic.sampler import ElasticSampler
from kolo.torch.elastic.state import TorchState
from kolo.torch.errors import HorovodInternalError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run"]

_common.bind(_C)


def run(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorates a training function `func(state, *args, **kwargs)` (its first argument a
    State, e.g. a TorchState) so that it survives lost and added ranks (see the module): it
    syncs the state from rank 0 first, and on HorovodInternalError or HostsUpdatedInterrupt it
    re-forms the job and calls func again. Returns what func returns. An op that failed alone
    (a bad argument, a mismatch between ranks) raises to the caller, as does a failed init()
    (kolorun's driver gave up on this worker, or formed no generation in time). Collective ops
    must happen inside func (or in the state's sync), not before the call: a new worker joins
    while the others are re-forming at their commit."""
    return _common.run_fn(func, _common.reinit(mpi_ops.shutdown, mpi_ops.init),
                          (HorovodInternalError, _CommonInternalError))
