"""kolo.data: Horovod's horovod.data, the base of its framework data loaders: BaseDataLoader
(iterate batches through one hook) and AsyncDataLoaderMixin (a thread that reads batches ahead
into a bounded queue). Framework-free; docs/TORCH.md, "Horovod's other names"."""

from kolo.data.data_loader_base import AsyncDataLoaderMixin, BaseDataLoader

__all__ = ["AsyncDataLoaderMixin", "BaseDataLoader"]
