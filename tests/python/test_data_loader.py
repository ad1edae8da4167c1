"""kolo.data (Horovod's horovod.data) in a 2-rank job under kolorun: each rank loads its own
shard through an AsyncDataLoaderMixin loader (a thread reading ahead into a bounded queue) and
a plain BaseDataLoader; both yield every batch of a pass, in order, once per iteration, with
_process_batch applied, for several epochs; the ranks' sums meet in an allreduce. An exception
in _iterate() is raised by the iteration that reaches it; close_async_loader() stops a thread
blocked on a full queue; a queue size of 0 reads on the caller's thread."""

import threading

import pytest
import torch
import kolo.torch as hvd
from kolo.data import AsyncDataLoaderMixin, BaseDataLoader

hvd.init()
RANK, SIZE = hvd.rank(), hvd.size()


class ShardLoader(BaseDataLoader):
    """Batches of this rank's shard of 0..n-1: a batch is a tensor of `batch` numbers."""

    def __init__(self, n, batch, fail_at=None):
        self.samples = list(range(RANK, n, SIZE))
        self.batch = batch
        self.fail_at = fail_at
        self.threads = set()

    def __len__(self):
        return (len(self.samples) + self.batch - 1) // self.batch

    def _iterate(self):
        self.threads.add(threading.current_thread().name)
        for i in range(0, len(self.samples), self.batch):
            if self.fail_at is not None and i >= self.fail_at:
                raise ValueError("bad sample %d" % i)
            yield torch.tensor(self.samples[i:i + self.batch])

    def _process_batch(self, batch):
        return batch * 10


class AsyncShardLoader(AsyncDataLoaderMixin, ShardLoader):
    pass


@pytest.mark.parametrize("queue_size", [0, 2, 64])
def test_every_pass_yields_the_shard_in_order_and_the_ranks_cover_the_data(queue_size):
    loader = AsyncShardLoader(queue_size, False, 41, 4)
    assert len(loader) == len(range(RANK, 41, SIZE)) // 4 + (len(range(RANK, 41, SIZE)) % 4 > 0)
    try:
        for epoch in range(3):
            seen = torch.cat(list(loader))
            assert seen.tolist() == [10 * s for s in range(RANK, 41, SIZE)], (epoch, seen)
            total = hvd.allreduce(seen.sum().double(), op=hvd.Sum, name="data.%d.%d" % (
                queue_size, epoch))
            assert total.item() == 10 * sum(range(41))
    finally:
        loader.close_async_loader()
    on_caller = threading.current_thread().name in loader.threads
    assert on_caller == (queue_size == 0), loader.threads


def test_the_base_loader_iterates_in_place():
    loader = ShardLoader(9, 2)
    assert [b.tolist() for b in loader] == [[10 * s for s in loader.samples[i:i + 2]]
                                            for i in range(0, len(loader.samples), 2)]
    with pytest.raises(NotImplementedError):
        len(BaseDataLoader())
    with pytest.raises(NotImplementedError):
        list(BaseDataLoader())


def test_an_exception_in_iterate_is_raised_by_the_iteration_that_meets_it():
    loader = AsyncShardLoader(4, False, 40, 2, fail_at=6)
    try:
        got = []
        with pytest.raises(ValueError, match="bad sample 6"):
            for batch in loader:
                got.append(batch)
        assert len(got) == 3
        assert list(loader) == []  # the thread ended with the error: the next pass is empty
    finally:
        loader.close_async_loader()


def test_close_stops_a_thread_blocked_on_a_full_queue():
    loader = AsyncShardLoader(1, False, 1000, 1)
    iterator = iter(loader)
    next(iterator)  # the thread runs, and soon waits on the full queue
    loader.close_async_loader()
    assert not loader.thread.is_alive()
