"""ElasticSampler: Horovod's sampler for elastic jobs (horovod.torch.elastic.ElasticSampler
names and semantics). Like torch's DistributedSampler it gives each rank every size()-th index
of the epoch's (shuffled) order, padded to a multiple of size(); unlike it, it counts the
samples the job processed this epoch (record_batch), and after a reset deals only the rest of
the epoch over the new ranks, so an epoch resumes without repeating or losing samples.

Its state (epoch, processed_num) is the same on every rank: TorchState saves, restores and
syncs it (state.py). Threading: the training thread's, as torch samplers.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Any

import torch.utils.data

from kolo.torch.mpi_ops import rank, size  # module names, as Horovod's (tests fake them)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sized


class ElasticSampler(torch.utils.data.Sampler[int]):
    """Deals a dataset's indices over the ranks and deals the rest again after a reset.

    Record each processed batch with record_batch() (every rank, the same sizes), keep the
    sampler in a TorchState, and call set_epoch() at the end of each epoch (not the start: a
    reset mid-epoch must not forget the epoch's progress). `shuffle`: a new order each epoch,
    from `seed` + epoch (the same seed on every rank)."""

    def __init__(self, dataset: Sized, shuffle: bool = True, seed: int = 0) -> None:
        """`dataset`: anything with a constant len(); `shuffle` and `seed` as the class says.
        Deals the first epoch over the current ranks (init() must have run)."""
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0  # samples the job processed this epoch, over every rank
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices: list[int] = []
        self.num_samples = 0  # indices each rank gets of the rest of the epoch
        self.total_size = 0  # num_samples * num_replicas (the rest, padded)
        self.indices: list[int] = []  # this rank's, from the last __iter__
        self.reset()

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch `epoch`: its order (when shuffling) and no sample processed yet."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx: int, batch_size: int) -> None:
        """Counts one batch of `batch_size` samples as processed on every rank (Horovod's
        arguments; batch_idx is not used)."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self) -> dict[str, Any]:
        """The epoch and the samples processed in it."""
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Takes a state_dict()'s epoch and progress and deals the rest of that epoch."""
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self) -> None:
        """Deals the epoch's indices not processed yet over the current ranks (hvd.size(),
        hvd.rank()): every rank gets num_samples of them."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        """This rank's indices: every num_replicas-th of the rest of the epoch, from its rank
        on, after padding the rest with its own first indices to total_size (over and over
        when fewer are left than ranks, where Horovod's fails an assertion)."""
        padded = self.remaining_indices[:]
        while len(padded) < self.total_size:
            padded += padded[:self.total_size - len(padded)]
        self.indices = padded[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self) -> int:
        """num_samples: how many indices __iter__ gives this rank."""
        return self.num_samples
