"""The names kolo matches kolo.tensorflow's ops by across ranks.

Eagerly, an op given no name is numbered per process (and per process set) in the order it is
submitted, as kolo.torch and Horovod do: every rank must submit its unnamed ops in the same
order. The numbering is kolo.common.op_names' (kolo.torch's too): an op refused on one rank
before kolo took it (Adasum, a dtype kolo lacks, alltoall splits that do not add up, a root out
of range) gives its number back, a completed join starts a new epoch, and shutdown() forgets it
all, so that after init() every rank of the new job numbers from 0 again. The op library marks
the error of an op kolo had taken (SUBMITTED_PAYLOAD, python/tensorflow/kolo_async_kernel.h);
every other error gives the number back.

In a graph (tf.function), the name is made once, when the function is traced, from the
call site: "<outermost function>/<name scope>/Kolo<Op>_<input tensor's name>" made unique within
its graph as TensorFlow makes op names unique (Horovod names its graph ops the same way, from the
input tensor's name). Ranks that trace the same code get the same names, also when they trace it
a different number of times, and two functions never share a name unless they have the same
Python name and the same ops. A name given explicitly is used as it is eagerly; in a graph it is
made unique and gets the name scope (without it when ignore_name_scope, as in Horovod).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework import func_graph, ops

from kolo.common.op_names import UnnamedOps, member_names

if TYPE_CHECKING:
    from collections.abc import Callable

# The payload (absl::Status::SetPayload's type URL) the op library puts on the error of an op
# kolo had taken: it failed later (a mismatch, a lost rank), on every rank that submitted it.
SUBMITTED_PAYLOAD = "kolo.submitted"

_unnamed = UnnamedOps()


def forget_unnamed_ops() -> None:
    """Numbers the next unnamed eager op of every process set 0 again (after shutdown)."""
    _unnamed.forget()


def joined(set_id: int) -> None:
    """An eager join of `set_id` (0: every rank) completed: unnamed ops number anew."""
    _unnamed.joined(set_id)


def executing_eagerly() -> bool:
    """Whether ops run eagerly here (not while a tf.function or a v1 graph is being built)."""
    return bool(context.executing_eagerly())


def normalize(name: str) -> str:
    """Horovod's _normalize_name: the characters TensorFlow allows in op names."""
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def submitted(error: BaseException) -> bool:
    """Whether the failed op had been taken by kolo (the op library's mark on its error)."""
    payloads = getattr(error, "experimental_payloads", None) or {}
    # TensorFlow gives the type URLs as bytes.
    return any(key in (SUBMITTED_PAYLOAD, SUBMITTED_PAYLOAD.encode()) for key in payloads)


def _outermost_function_name(graph: Any) -> str | None:
    """The Python name of the tf.function whose graph holds `graph` (cond and while bodies are
    graphs of their own inside it), or None outside a function."""
    name = None
    while isinstance(graph, func_graph.FuncGraph):
        name = graph.name
        graph = getattr(graph, "outer_graph", None)
    return name


def graph_name(kind: str, name: object, tensor: tf.Tensor | None = None,
               ignore_name_scope: bool = False) -> str:
    """The kolo name of a `kind` op ("allreduce", ...; "Kolo" + its title) being added to a
    graph: made from the call site (see the module)."""
    graph = ops.get_default_graph()
    if name is None:
        title = "Kolo" + "".join(part.title() for part in kind.split("_"))
        base = title if tensor is None else "%s_%s" % (title, normalize(tensor.name))
    else:
        base = normalize(str(name))
    unique = graph.unique_name(base)
    if ignore_name_scope:
        unique = unique.rsplit("/", 1)[-1]
    outer = _outermost_function_name(graph)
    return unique if outer is None else "%s/%s" % (outer, unique)


@functools.lru_cache(maxsize=4096)
def _name_tensor(text: str) -> tf.Tensor:
    return tf.constant(text)


def _names_input(names: list[str], count: int | None, named: bool) -> tf.Tensor:
    """The op's name input, eagerly: a string tensor, because TensorFlow's eager fast path takes
    only tensors and a str sends every call down its Python fallback (~25 us more an op,
    measured). A name given explicitly comes back each step, so its tensor is kept."""
    if count is not None:
        return tf.constant(names, dtype=tf.string)
    return _name_tensor(names[0]) if named else tf.constant(names[0])


def named_op(kind: str, name: object, set_id: int, tensor: tf.Tensor | None,
             ignore_name_scope: bool, run: Callable[[Any], Any],
             count: int | None = None) -> Any:
    """Returns run(names): `names` is the op's name input (one name, or for a group of `count`
    tensors the members' names). In a graph it is made from the call site; eagerly the name
    given, or the set's next number, given back when run raises for an op kolo never took."""
    if not executing_eagerly():
        base = graph_name(kind, name, tensor, ignore_name_scope)
        return run(base if count is None else member_names(base, count))
    named = name is not None
    return _unnamed.submit(kind, None if name is None else str(name), set_id,
                           lambda names: run(_names_input(names, count, named)), count,
                           submitted)
