"""hvd.elastic: Horovod's elastic training for TensorFlow 2 (horovod.tensorflow.elastic names and
semantics) on kolo.

    @hvd.elastic.run
    def train(state):
        while state.epoch < epochs:
            for state.batch in range(state.batch, batches_per_epoch):
                ...   # a training step with DistributedGradientTape
                if state.batch % 10 == 9: state.commit()
            state.epoch += 1
            state.batch = 0
            state.commit()

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)
    train(state)

Launched by `kolorun --min-np/--max-np/--host-discovery-script` (docs/ELASTIC.md), the job
survives lost ranks and grows when hosts join: when an op fails because a rank was lost, run()
restores the last commit, re-forms the job (hvd.shutdown(), hvd.init(): the survivors are
renumbered) and syncs the state from the new rank 0; when a commit finds that hosts were added
(HostsUpdatedInterrupt), every rank re-forms there keeping its state. In a fixed-size job the
same code runs, and a failure is restored and retried in the same job. kolo.tensorflow.keras's
elastic adds KerasState and the model.fit callbacks. docs/TENSORFLOW.md, "Elastic training".

A job failure reaches run() as HorovodInternalError from an eager op, and as TensorFlow's error
for a failed job (AbortedError, DeadlineExceededError, UnavailableError, InternalError) from a
kolo op inside a tf.function (model.fit's train step, broadcast_variables): run() takes both as
Horovod's wrapper takes its ops' errors. A kolo op that failed alone (a bad argument, ranks that
disagree: InvalidArgumentError, FailedPreconditionError) goes to the caller.

Threading: the training thread's, as kolo.common.elastic's.
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from kolo.common import elastic as _common
from kolo.common.elastic import ObjectState, State
from kolo.common.errors import HorovodInternalError
from kolo.tensorflow import mpi_ops
from kolo.tensorflow.functions import broadcast_object, broadcast_variables, optimizer_variables
from kolo.tensorflow.optimizer import _is_keras3

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["ObjectState", "State", "TensorFlowKerasState", "TensorFlowState", "run"]

_common.bind(mpi_ops._basics)


def _kolo_job_failure(error: Any) -> str | None:
    """The kolo status name when `error` (a tf.errors.OpError) is a kolo op's report that the job
    failed, else None. TensorFlow names the failed node in the message of an error raised in a
    graph ("Detected at node .../KoloAllreduce", the op types of python/tensorflow/
    op_registrations.cc), as Horovod's wrapper finds its ops' names there."""
    code = mpi_ops._JOB_FATAL_CODES.get(error.error_code)
    if code is None:
        return None
    return code if "Kolo" in (error.message or "") else None


@contextlib.contextmanager
def _job_failure_raises_internal_error() -> Iterator[None]:
    """Raises HorovodInternalError (the TensorFlow error as its cause) for a kolo op's report
    that the job failed, inside a tf.function; other errors go through."""
    try:
        yield
    except tf.errors.OpError as error:
        code = _kolo_job_failure(error)
        if code is None:
            raise
        raise HorovodInternalError(error.message, code) from error


def run(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorates a training function `func(state, *args, **kwargs)` (its first argument a State,
    e.g. a TensorFlowKerasState) so that it survives lost and added ranks (see the module): it
    syncs the state from rank 0 first, and when the job failed or hosts changed it re-forms the
    job and calls func again. Returns what func returns. An op that failed alone raises to the
    caller, as does a failed init() (kolorun's driver gave up on this worker, or formed no
    generation in time). Collective ops must happen inside func (or in the state's sync), not
    before the call: a new worker joins while the others re-form at their commit."""
    @functools.wraps(func)
    def wrapper(state: Any, *args: Any, **kwargs: Any) -> Any:
        with _job_failure_raises_internal_error():
            return func(state, *args, **kwargs)
    return _common.run_fn(wrapper, _common.reinit(mpi_ops.shutdown, mpi_ops.init),
                          (HorovodInternalError,))


def _model_built(model: Any) -> bool:
    return model.built if hasattr(model, "build") else True


def _model_variables(model: Any) -> list[Any]:
    """The model's weights (trainable and not), what model.variables is in tf-keras: Keras 3's
    model.variables also holds its layers' seed-generator states (dropout's random state), each
    rank's own, which a sync would make the same everywhere."""
    return list(model.weights)


def build_optimizer(optimizer: Any, model: Any) -> None:
    """Makes the optimizer's variables for the model's trainable variables now, when they do not
    exist yet: Keras 3's and tf-keras's optimizers make theirs at the first apply, and Keras 2's
    legacy ones their slots. Horovod's TensorFlow 2 example runs a training step before making the
    state for this; here a worker that joins a running job has the same optimizer variables as
    the others before the first sync, as run() needs."""
    if optimizer is None:
        return
    variables = model.trainable_variables
    if hasattr(optimizer, "_create_all_weights"):  # Keras 2's legacy OptimizerV2
        optimizer._create_all_weights(variables)
    elif _is_keras3(optimizer):
        if not optimizer.built:
            optimizer.build(variables)
    elif hasattr(optimizer, "build") and not getattr(optimizer, "_built", False):
        optimizer.build(variables)  # tf-keras's optimizer: _built is set by its first build


def _check_eager(session: Any, what: str) -> None:
    if session is not None or not tf.executing_eagerly():
        raise ValueError("%s: kolo.tensorflow supports TensorFlow 2's eager execution only (no "
                         "TF1 graph or session); make it outside a tf.function and without "
                         "session=" % what)


class _VariablesState(ObjectState):
    """An ObjectState that also keeps TensorFlow variables (_state_variables()): save() copies
    their values to numpy, restore() assigns them back, sync() broadcasts rank 0's and saves
    them."""

    def _state_variables(self) -> list[Any]:
        raise NotImplementedError()

    def save(self) -> None:
        """Copies the variables' values, then the attributes."""
        self._save_variables()
        super().save()

    def restore(self) -> None:
        """Assigns the saved values back, then the attributes'."""
        self._load_variables()
        super().restore()

    def sync(self) -> None:
        """Broadcasts the variables from rank 0 (a collective call), saves them, then takes rank
        0's attributes."""
        with _job_failure_raises_internal_error():  # its broadcasts run in a tf.function
            broadcast_variables(self._state_variables(), root_rank=0)
        self._save_variables()
        super().sync()

    def _save_variables(self) -> None:
        self._saved_values = [np.array(v.numpy(), copy=True) for v in self._state_variables()]

    def _load_variables(self) -> None:
        for variable, value in zip(self._state_variables(), self._saved_values):
            variable.assign(value)


class TensorFlowKerasState(_VariablesState):
    """The state of a Keras model and its optimizer (Horovod's TensorFlowKerasState), for Keras 3
    and tf-keras: save() keeps numpy copies of their variables, restore() assigns them back,
    sync() broadcasts rank 0's. Every other keyword argument becomes an attribute kept as
    ObjectState keeps it.

    `model`: a built Keras model; `optimizer`: its optimizer when not compiled into the model;
    `backend`: accepted for Horovod's TF1 sessions, not used (TensorFlow 2 only). The optimizer's
    variables are made at once when it has none yet (see build_optimizer)."""

    def __init__(self, model: Any, optimizer: Any = None, backend: Any = None,
                 **kwargs: Any) -> None:
        """See the class. Raises ValueError for a model that is not built, as Horovod's."""
        _check_eager(None, "TensorFlowKerasState")
        self.model = model
        if not _model_built(model):
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.optimizer = optimizer or getattr(model, "optimizer", None)
        self.backend = backend
        build_optimizer(self.optimizer, model)
        self._save_variables()
        super().__init__(bcast_object=broadcast_object, get_rank=mpi_ops.rank, **kwargs)

    def _state_variables(self) -> list[Any]:
        optimizer = [] if self.optimizer is None else optimizer_variables(self.optimizer)
        return _model_variables(self.model) + optimizer


class TensorFlowState(_VariablesState):
    """The state of a list of TensorFlow variables (Horovod's TensorFlowState), for TensorFlow 2's
    eager execution: save() keeps numpy copies of their values, restore() assigns them back,
    sync() broadcasts rank 0's. Every other keyword argument becomes an attribute kept as
    ObjectState keeps it.

    `variables`: the tf.Variables (default: tf.compat.v1.global_variables(), as Horovod's, which
    is empty in TensorFlow 2); `session`: Horovod's TF1 session, which must be None."""

    def __init__(self, variables: Any = None, session: Any = None, **kwargs: Any) -> None:
        """See the class. Unlike Horovod's, it does not broadcast the variables here (in
        TensorFlow 2 Horovod's does, once, and its sync() then does not): run() syncs first."""
        _check_eager(session, "TensorFlowState")
        self.variables = list(variables or tf.compat.v1.global_variables())
        self.session = None
        self._save_variables()
        super().__init__(bcast_object=broadcast_object, get_rank=mpi_ops.rank, **kwargs)

    def _state_variables(self) -> list[Any]:
        return self.variables
