"""Horovod's horovod.tensorflow.util, which scripts copied from Horovod's tests reach for
(`hvd.util._executing_eagerly()`, `from horovod.tensorflow.util import _executing_eagerly`):
the same names and behaviour on kolo."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tensorflow as tf

from kolo.tensorflow.op_names import executing_eagerly

if TYPE_CHECKING:
    from collections.abc import Callable


def _executing_eagerly() -> bool:
    """Whether ops run eagerly here (Horovod's name for it)."""
    return executing_eagerly()


def _make_subgraph(f: Callable[..., Any]) -> Any:
    """`f` as a tf.function (Horovod runs a step's collectives in one, so that they travel
    together)."""
    return tf.function(f)


def _cache(f: Callable[..., Any]) -> Callable[..., Any]:
    """Memoizes `f` by its positional arguments and whether ops run eagerly, as Horovod's."""
    cache: dict[Any, Any] = {}

    def wrapper(*args: Any) -> Any:
        key = (args, _executing_eagerly())
        if key not in cache:
            cache[key] = f(*args)
        return cache[key]
    return wrapper


def vars_to_refs(variables: Any) -> Any:
    """A variable's ref(), or nested lists of variables as nested tuples of refs (hashable)."""
    if isinstance(variables, list):
        return tuple(vars_to_refs(v) for v in variables)
    return variables.ref()


def refs_to_vars(refs: Any) -> Any:
    """The inverse of vars_to_refs."""
    if isinstance(refs, tuple):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()
