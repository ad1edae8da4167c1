"""The numbering of unnamed ops, one for kolo.torch and kolo.tensorflow (eager ops).

Ranks pair ops by name. An op given no name is numbered per process set in the order it is
submitted, as Horovod does ("allreduce.noname.3"): the nth unnamed op of a set on one rank pairs
with the nth on the others. So that the numbers stay paired whatever failed on one rank only:
- a number is kept only by an op kolo took: an op refused before it was submitted (a bad
  argument, a dtype kolo lacks, splits that do not add up, a root out of range) gives its
  number back, so that the next op of that rank gets the number the other ranks give theirs;
- a completed join starts a new numbering (an epoch) in its set, the global set's in every set:
  a join returns on every rank of the set at once, whatever each submitted before (a rank may
  have submitted ops its joined peers never will). Names of a later epoch carry it
  ("allreduce.noname.1.0");
- shutdown forgets everything (forget): after init() every rank of the new job, a survivor of a
  lost rank or a worker that just joined, numbers from 0 again.

Threading: every method may be called from any thread (one lock). Ops submitted from several
threads at once have no order to pair by anyway.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")


def was_submitted(error: BaseException) -> bool:
    """Whether `error` says kolo had taken its op before it failed (the binding marks such
    errors with a true `submitted` attribute); any other error means the op was refused before
    kolo took it."""
    return bool(getattr(error, "submitted", False))


def member_names(base: str, count: int | None) -> list[str]:
    """[base] for one tensor, else the names of a group's `count` members: base.0, base.1, ..."""
    return [base] if count is None else ["%s.%d" % (base, i) for i in range(count)]


class UnnamedOps:
    """One binding's numbering of unnamed ops (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: dict[int, int] = {}  # process set id -> the number of its next unnamed op
        self._joins: dict[int, int] = {}  # process set id -> joins completed in it (0: global)

    def _epoch(self, set_id: int) -> int:
        return self._joins.get(0, 0) + (self._joins.get(set_id, 0) if set_id != 0 else 0)

    def take(self, set_id: int) -> tuple[int, int]:
        """Takes the next number of the set: (epoch, number), for name() and give_back()."""
        with self._lock:
            number = self._next.get(set_id, 0)
            self._next[set_id] = number + 1
            return self._epoch(set_id), number

    def give_back(self, set_id: int, taken: tuple[int, int]) -> None:
        """Returns a number taken for an op kolo refused, unless a later one was taken since or a
        join began a new epoch."""
        epoch, number = taken
        with self._lock:
            if self._epoch(set_id) == epoch and self._next.get(set_id) == number + 1:
                self._next[set_id] = number

    @staticmethod
    def name(kind: str, taken: tuple[int, int]) -> str:
        """The name of the unnamed `kind` op ("allreduce") that took `taken`."""
        epoch, number = taken
        if epoch == 0:
            return "%s.noname.%d" % (kind, number)
        return "%s.noname.%d.%d" % (kind, epoch, number)

    def joined(self, set_id: int) -> None:
        """A join of `set_id` (0: every rank) completed on this rank: the set (every set, for the
        global one) numbers from 0 in a new epoch."""
        with self._lock:
            self._joins[set_id] = self._joins.get(set_id, 0) + 1
            for numbered in list(self._next):
                if set_id == 0 or numbered == set_id:
                    self._next[numbered] = 0

    def forget(self) -> None:
        """kolo shut down: the next unnamed op of every set is number 0 of epoch 0 again."""
        with self._lock:
            self._next.clear()
            self._joins.clear()

    def submit(self, kind: str, name: str | None, set_id: int,
               enqueue: Callable[[list[str]], T], count: int | None = None,
               submitted: Callable[[BaseException], bool] = was_submitted) -> T:
        """Returns enqueue(names): [the op's name], or for a group of `count` tensors its
        members' names (base.0, base.1, ...). A named op uses its name and takes no number.
        Without a name the base is the set's next number, given back when enqueue raises an
        exception for which submitted(exception) is false (the op never reached kolo).
        KeyboardInterrupt keeps the number: a wait was interrupted with the op in flight."""
        if name is not None:
            return enqueue(member_names(str(name), count))
        taken = self.take(set_id)
        try:
            return enqueue(member_names(self.name(kind, taken), count))
        except Exception as error:
            if not submitted(error):
                self.give_back(set_id, taken)
            raise
