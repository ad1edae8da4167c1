"""BaseDataLoader and AsyncDataLoaderMixin, with the names, arguments and behaviour of Horovod's
horovod/data/data_loader_base.py (v0.28.1):

    class MyLoader(BaseDataLoader):
        def __len__(self): return n_batches
        def _iterate(self): yield from batches

    class MyAsyncLoader(AsyncDataLoaderMixin, MyLoader):
        pass                       # MyAsyncLoader(async_loader_queue_size=64, ...)

    for batch in loader: ...       # one pass over _iterate(); again for the next epoch
    loader.close_async_loader()

The mixin's thread reads _iterate() over and over, each pass followed by an end-of-pass mark,
into a queue of async_loader_queue_size batches; each iteration of the loader yields one pass.
An exception in _iterate() is raised by the iteration that reaches it (and ends the thread). A
queue size of 0 iterates on the caller's thread. The thread is a daemon, as Horovod's.

Threading: a loader is iterated by one thread at a time; the mixin's thread only calls
_iterate() and fills the queue.
"""

from __future__ import annotations

import queue
import threading
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

# How often a worker blocked on a full queue looks whether the loader is closing.
_POLL_SECONDS = 0.1
# How long close_async_loader waits for the worker to leave _iterate().
_CLOSE_SECONDS = 30.0


class BaseDataLoader:
    """A data loader: iterating it yields `_process_batch(batch)` for every batch that
    `_iterate()` yields. Subclasses implement __len__ (the number of batches) and
    _iterate()."""

    def __len__(self) -> int:
        """The number of batches a pass yields."""
        raise NotImplementedError()

    def _iterate(self) -> Iterator[Any]:
        """Yields the batches of one pass (the subclass's)."""
        raise NotImplementedError()

    def __iter__(self) -> Iterator[Any]:
        """One pass over the batches."""
        for batch in self._iterate():
            yield self._process_batch(batch)

    def _process_batch(self, batch: Any) -> Any:
        """A hook a framework's trainer overrides to reshape each batch; the batch itself by
        default."""
        return batch


class _EndOfPass:
    """The mark the worker puts after each pass (Horovod puts None)."""


_END = _EndOfPass()


class AsyncDataLoaderMixin:
    """Reads the batches of a BaseDataLoader subclass ahead on a thread of its own (put it
    first among the bases: class L(AsyncDataLoaderMixin, MyLoader)). `async_loader_queue_size`
    batches at most wait in the queue (0: no thread, iterate in place); `debug_data_loader`
    prints what the thread and the iteration do. Other arguments go to the next base."""

    def __init__(self, async_loader_queue_size: int = 64, debug_data_loader: bool = False,
                 *args: Any, **kwargs: Any) -> None:
        """See the class."""
        self.async_loader_queue_size = async_loader_queue_size
        self.debug_data_loader = debug_data_loader
        super().__init__(*args, **kwargs)
        if self.async_loader_queue_size > 0:
            self.finished_event = threading.Event()
            self.queue: queue.Queue[Any] = queue.Queue(self.async_loader_queue_size)
            self.thread = threading.Thread(target=self._async_worker, daemon=True,
                                           name="kolo.data async loader")
            self.started = False

    def _debug(self, message: str) -> None:
        if self.debug_data_loader:
            print("AsyncDataLoaderMixin[%d]: %s" % (self.async_loader_queue_size, message),
                  flush=True)

    def close_async_loader(self) -> None:
        """Stops the thread: it leaves at its next batch (or at once if it waits on a full
        queue), and the batches read ahead are dropped. Waits up to 30 s for it to leave
        _iterate(); warns if it did not (it is a daemon thread)."""
        if self.async_loader_queue_size <= 0 or not self.started:
            return
        self.finished_event.set()
        self.thread.join(_CLOSE_SECONDS)
        if self.thread.is_alive():
            warnings.warn("kolo.data: the async loader's thread did not leave _iterate() "
                          "within %d s of close_async_loader(); it is left running (a daemon)"
                          % _CLOSE_SECONDS)
        while True:  # what it read ahead
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break
        self._debug("closed")

    def _put(self, item: Any) -> bool:
        """Puts `item` once the queue has room; False when the loader closed meanwhile."""
        while not self.finished_event.is_set():
            try:
                self.queue.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def _async_worker(self) -> None:
        """The thread: passes over _iterate() until the loader closes, each followed by the
        end-of-pass mark; an exception goes into the queue, and the thread ends."""
        try:
            passes = 0
            while not self.finished_event.is_set():
                count = 0
                for batch in self._iterate():  # type: ignore[attr-defined]
                    if not self._put(batch):
                        return
                    count += 1
                self._debug("pass %d read %d batches" % (passes, count))
                passes += 1
                if not self._put(_END):
                    return
        except Exception as error:  # noqa: BLE001  (raised by the iteration that meets it)
            self._put(error)
            self._put(_END)
        finally:
            self._debug("thread stopped")

    def __iter__(self) -> Iterator[Any]:
        """One pass, from the queue the thread fills (started by the first iteration)."""
        if self.async_loader_queue_size <= 0:
            yield from super().__iter__()  # type: ignore[misc]
            return
        if not self.started:
            self.started = True
            self.thread.start()
        while True:
            try:
                batch = self.queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if not self.thread.is_alive():  # closed: nothing more comes
                    return
                continue
            if batch is _END:
                return
            if isinstance(batch, Exception):
                raise batch
            yield self._process_batch(batch)  # type: ignore[attr-defined]
