"""The names kolo matches kolo.tensorflow's ops by across ranks.

Eagerly, an op given no name is numbered per process (and per process set) in the order it is
submitted, as kolo.torch and Horovod do: every rank must submit its unnamed ops in the same
order. In a graph (tf.function), the name is made once, when the function is traced, from the
call site: "<outermost function>/<name scope>/Kolo<Op>_<input tensor's name>" made unique within
its graph as TensorFlow makes op names unique (Horovod names its graph ops the same way, from the
input tensor's name). Ranks that trace the same code get the same names, also when they trace it
a different number of times, and two functions never share a name unless they have the same
Python name and the same ops. A name given explicitly is used as it is eagerly; in a graph it is
made unique and gets the name scope (without it when ignore_name_scope, as in Horovod).

shutdown() forgets the eager numbering (forget_unnamed_ops), so that after init() every rank of
the new job, a survivor of a lost rank or a worker that just joined, numbers from 0 again.
"""

import itertools
import re
import threading

from tensorflow.python.eager import context
from tensorflow.python.framework import func_graph
from tensorflow.python.framework import ops

_lock = threading.Lock()
_noname_counters = {}  # (process set id) -> counter of unnamed eager ops


def forget_unnamed_ops():
    """Numbers the next unnamed eager op of every process set 0 again (after shutdown)."""
    with _lock:
        _noname_counters.clear()


def executing_eagerly():
    return context.executing_eagerly()


def normalize(name):
    """Horovod's _normalize_name: the characters TensorFlow allows in op names."""
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def _outermost_function_name(graph):
    """The Python name of the tf.function whose graph holds `graph` (cond and while bodies are
    graphs of their own inside it), or None outside a function."""
    name = None
    while isinstance(graph, func_graph.FuncGraph):
        name = graph.name
        graph = getattr(graph, "outer_graph", None)
    return name


def op_name(kind, name, process_set_id, tensor=None, ignore_name_scope=False):
    """The kolo name of a `kind` op ("allreduce", ...; "Kolo" + its title in graph names)."""
    if executing_eagerly():
        if name is not None:
            return str(name)
        with _lock:
            counter = _noname_counters.setdefault(process_set_id, itertools.count())
            return "%s.noname.%d" % (kind, next(counter))
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
