"""Horovod's elastic training state and retry loop (horovod.common.elastic names and
semantics), for any binding: State, ObjectState and run_fn, over the binding's broadcast_object
and rank. kolo.torch.elastic builds TorchState and hvd.elastic.run on them.

In an elastic job (kolorun --min-np/--max-np/--host-discovery-script, docs/ELASTIC.md) kolorun's
driver holds the membership; host changes are polled from it (bind() gives the binding's native
elastic_enabled() and elastic_poll(since)) at every commit() by rank 0, which hands each change to
its states as Horovod's worker notification service does, through State.on_hosts_updated; rank
0's view of the notifications goes to every rank, so that all leave the training function at the
same commit. Outside an elastic job check_host_updates() neither raises nor communicates (there
is no driver to hear from; Horovod's broadcasts rank 0's empty view all the same).

Threading: a State belongs to the training thread, but on_hosts_updated may be called from any
thread (Horovod's notification service calls it from its own); bind() once, at import of the
binding.
"""

from __future__ import annotations

import enum
import functools
import queue
import time
from typing import TYPE_CHECKING, Any

from kolo.common.errors import HorovodInternalError, HostsUpdatedInterrupt, KoloError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Protocol

    class NativeElastic(Protocol):
        """What bind() needs of a binding's native backend (kolo/elastic.h's calls)."""

        def elastic_enabled(self) -> bool: ...
        def elastic_poll(self, since: int, /) -> tuple[int, int]: ...

# Horovod's HostUpdateResult (kolo::elastic::HostUpdateBits): what changed, as bits.
HOSTS_REMOVED = 1
HOSTS_ADDED = 2


class HostUpdateResult(enum.IntFlag):
    """What changed in the job's hosts (horovod.runner.elastic.worker.HostUpdateResult): the
    `update_res` of State.on_hosts_updated."""

    no_update = 0
    removed = HOSTS_REMOVED
    added = HOSTS_ADDED
    mixed = HOSTS_REMOVED | HOSTS_ADDED

# kolo status codes of an op that failed alone (the job goes on): a reset would not help, so
# run() lets them through instead of retrying forever.
_OP_ONLY_CODES = frozenset({"INVALID_ARGUMENT", "FAILED_PRECONDITION", "MISMATCH"})

_native: NativeElastic | None = None  # set by bind()


def bind(native: NativeElastic) -> None:
    """Makes `native` the source of host updates for every State (the binding calls it)."""
    global _native
    _native = native


class State:
    """The state a training function keeps across resets (Horovod's State): saved to host
    memory by commit(), put back by restore() after a failure, and sent from rank 0 to every
    rank by sync() when the job (re-)forms. Subclasses say what save, restore and sync do.

    `bcast_object(obj)`: rank 0's obj on every rank; `get_rank()`: this process's rank."""

    def __init__(self, bcast_object: Callable[[Any], Any], get_rank: Callable[[], int]) -> None:
        """See the class."""
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_messages: queue.Queue[tuple[Any, int]] = queue.Queue()
        self._last_updated_timestamp: Any = 0  # of the notifications (Horovod's)
        self._driver_seen = 0  # the driver's clock of host changes, as far as handed on
        self._reset_callbacks: list[Callable[[], Any]] = []

    def register_reset_callbacks(self, callbacks: Iterable[Callable[[], Any]]) -> None:
        """Adds functions that on_reset() calls after every reset (a rank lost or added), in
        order: e.g. to scale the learning rate with the new hvd.size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self) -> None:
        """Called by run() after the job re-formed, before sync(): forgets the host
        notifications not yet checked (the new job is what they announced), reset(), then the
        registered callbacks."""
        self._host_messages = queue.Queue()
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp: Any, update_res: int) -> None:
        """Horovod's notification that the job's hosts changed at `timestamp` (a number that
        grows with every change) with `update_res` (HostUpdateResult bits); the next commit()
        or check_host_updates() acts on it. kolo calls it on rank 0 for every change kolorun's
        elastic driver reports (timestamp: time.time() when rank 0 heard of it). Any thread."""
        self._host_messages.put((timestamp, int(update_res)))

    def commit(self) -> None:
        """save(), then check_host_updates(): commits are where a job grows or shrinks without
        losing work. Each copies the state (from the GPU too): commit every few batches, trading
        the time it takes against the batches a failure makes the job redo."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self) -> None:
        """Raises HostsUpdatedInterrupt on every rank when hosts changed since the last check:
        rank 0 asks kolorun's elastic driver (each change becomes an on_hosts_updated
        notification), takes the notifications newer than the last it acted on, and every rank
        receives rank 0's view (a collective call). skip_sync is True when hosts were only
        removed. Outside an elastic job, returns at once."""
        native = _native
        if native is None or not native.elastic_enabled():
            return
        if self._rank() == 0:
            driver_clock, kinds = native.elastic_poll(self._driver_seen)
            if kinds:
                self._driver_seen = driver_clock
                # Later than every notification so far, as a change the driver reports is.
                self.on_hosts_updated(max(time.time(), self._last_updated_timestamp + 1e-3),
                                      kinds)
        previous = last = self._last_updated_timestamp
        update = 0
        while True:
            try:
                timestamp, kinds = self._host_messages.get_nowait()
            except queue.Empty:
                break
            if timestamp > last:  # as Horovod: an older notification after a newer is stale
                last = timestamp
                update |= kinds
        # A tuple on every rank, as Horovod's: kolo.tensorflow's broadcast_object, as Horovod's,
        # names its ops after the object's type, which must then be the same on every rank.
        previous, self._last_updated_timestamp, update, self._driver_seen = self._bcast_object(
            (previous, last, update, self._driver_seen))
        if self._last_updated_timestamp > previous:
            raise HostsUpdatedInterrupt(update == HOSTS_REMOVED)

    def save(self) -> None:
        """Saves the state to host memory."""
        raise NotImplementedError()

    def restore(self) -> None:
        """Puts back the last saved state, undoing what changed since."""
        raise NotImplementedError()

    def sync(self) -> None:
        """Makes every rank's state rank 0's (a collective call)."""
        raise NotImplementedError()

    def reset(self) -> None:
        """What to redo after a reset, before sync(); nothing by default."""


class ObjectState(State):
    """State of plain Python objects (Horovod's ObjectState): each keyword argument becomes an
    attribute; save() keeps their values, restore() sets them back, sync() sends rank 0's to
    every rank with `bcast_object`."""

    def __init__(self, bcast_object: Callable[[Any], Any], get_rank: Callable[[], int],
                 **kwargs: Any) -> None:
        """`bcast_object` and `get_rank` as State's; `kwargs`: the attributes and their first
        values (saved at once)."""
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self) -> None:
        """Keeps the attributes' current values (the objects themselves: mutate a list in
        place and the saved value changes too, as in Horovod)."""
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self) -> None:
        """Sets every attribute back to its saved value."""
        self._set_attrs()

    def sync(self) -> None:
        """Takes rank 0's saved values, on every rank, and sets the attributes to them."""
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self) -> None:
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def resets_for(error: BaseException, internal_errors: tuple[type[BaseException], ...]) -> bool:
    """Whether run() restores and resets after `error`: one of the binding's
    HorovodInternalError classes, unless kolo says the op failed alone (a bad argument, a
    mismatch between ranks, a precondition), which would fail the same way after a reset. An
    error a script raises itself (code UNKNOWN) resets, as in Horovod."""
    if not isinstance(error, internal_errors):
        return False
    return str(getattr(error, "code", "UNKNOWN")).upper() not in _OP_ONLY_CODES


def reinit(shutdown: Callable[[], Any], init: Callable[[], Any]) -> Callable[[], None]:
    """The reset run_fn calls for a binding with these `shutdown` and `init`: re-forms the job,
    shutdown (which reports the loss that made the reset: already known, so KoloError is not
    raised), then init, which joins the next generation in an elastic job."""
    def reset() -> None:
        try:
            shutdown()
        except KoloError:
            pass
        init()
    return reset


def run_fn(func: Callable[..., Any], reset: Callable[[], None],
           internal_errors: tuple[type[BaseException], ...] = (HorovodInternalError,)
           ) -> Callable[..., Any]:
    """Horovod's elastic retry loop around `func(state, *args, **kwargs)`: sync the state, call
    func; when it raises one of `internal_errors` (a rank was lost), restore the last commit;
    when it raises HostsUpdatedInterrupt, keep the state (and skip the sync when hosts were only
    removed, except in kolorun's elastic job, where the next generation may hold ranks that need
    it); either way reset() (shutdown and init: the next generation) and state.on_reset(),
    and go again. Returns what func returns; an error of an op that failed alone, or of reset(),
    goes to the caller."""
    @functools.wraps(func)
    def wrapper(state: State, *args: Any, **kwargs: Any) -> Any:
        skip_sync = False
        while True:
            try:
                # In kolorun's elastic job the generation may hold a newcomer, or a survivor
                # that restored after a failure, whose sync the others would not join (their
                # first op then waits forever on another name: kolo issue 53, F6): there every
                # reset syncs. Outside one, Horovod's skip after a removal.
                if not skip_sync or (_native is not None and _native.elastic_enabled()):
                    state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as interrupt:
                skip_sync = interrupt.skip_sync
            except Exception as error:
                if not resets_for(error, internal_errors):
                    raise
                state.restore()
                skip_sync = False
            reset()
            state.on_reset()
    return wrapper
