"""Horovod's process sets (horovod.common.process_sets names and semantics) on kolo's, for
kolo.torch: kolo.common.process_sets bound to the native module, whose names this module
re-exports (ProcessSet, global_process_set, add_process_set, remove_process_set).

A ProcessSet is a subset of the job's ranks; ops given `process_set=` run among its members
only (kolo::ProcessSetScope around the enqueue, in the native module). Sets are registered
with kolo at init (`init(process_sets=[...])`, the same as KOLO_PROCESS_SETS) or later with
add_process_set, both collective over every rank of the job. Within a set, its members in
ascending order are its ranks 0, 1, ...; broadcast roots and join's last rank stay job ranks.

Threading: add_process_set / remove_process_set are collective and one at a time per process;
the rest may be called from any thread.
"""

from __future__ import annotations

from kolo.common import process_sets as _common
from kolo.common.process_sets import (ProcessSet, _after_init, _after_shutdown,  # noqa: F401
                                      _before_init, _set_id, add_process_set,
                                      global_process_set, remove_process_set)
from kolo.torch import _C

__all__ = ["ProcessSet", "add_process_set", "global_process_set", "remove_process_set"]

_common.bind(_C, "kolo.torch")
