"""hvd.elastic for Keras (horovod.tensorflow.keras.elastic and horovod.keras.elastic names and
semantics) on kolo, for Keras 3 and tf-keras: KerasState, run, and the callbacks that keep the
state's batch and epoch and commit it during model.fit.

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.CommitStateCallback(state)]

    @hvd.elastic.run
    def train(state):
        state.model.fit(x, y, epochs=epochs, initial_epoch=state.epoch, callbacks=callbacks)

    train(state)

model.fit's train step is a tf.function: a lost rank fails it with TensorFlow's error for a
failed job, which run() takes as a reset (kolo.tensorflow.elastic). The callbacks derive from
tf.keras's Callback (Keras 3's, or tf-keras's under TF_USE_LEGACY_KERAS=1)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from kolo.common.elastic import ObjectState, State
from kolo.tensorflow.elastic import TensorFlowKerasState, run

__all__ = ["CommitStateCallback", "KerasState", "ObjectState", "State",
           "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run"]

_keras: Any = tf.keras
_Callback: Any = _keras.callbacks.Callback  # Keras 3's, or tf-keras's: untyped


class KerasState(TensorFlowKerasState):
    """The state of a Keras model and optimizer (Horovod's KerasState): TensorFlowKerasState
    with Keras's backend. `optimizer`: when not compiled into the model; every other keyword
    argument becomes an attribute (batch=0, epoch=0 for the callbacks)."""

    def __init__(self, model: Any, optimizer: Any = None, **kwargs: Any) -> None:
        """See the class."""
        super().__init__(model, optimizer=optimizer, backend=_keras.backend, **kwargs)


class CommitStateCallback(_Callback):
    """Commits `state` at the end of every `batches_per_commit`-th batch and of every epoch."""

    def __init__(self, state: State, batches_per_commit: int = 1) -> None:
        """`state`: the State to commit; `batches_per_commit`: batches between commits."""
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Counts from the start again: every rank, old or new, commits at the same batches
        after a reset."""
        self.batches_remaining = self.batches_per_commit

    def on_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.commit()

    def commit(self) -> None:
        """state.commit()."""
        self.state.commit()


class UpdateBatchStateCallback(_Callback):
    """Sets state.batch to the number of the batch that ended (0 again at the end of every
    epoch). With steps_per_epoch given to fit, the first epoch after a reset is shortened in the
    callbacks' params by the batches already done, as Horovod's."""

    def __init__(self, state: Any) -> None:
        """`state`: a State with a `batch` attribute."""
        super().__init__()
        self.state = state
        self.steps_per_epoch: int | None = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params.get("steps")
            self.params["steps"] = self.steps_per_epoch - self.state.batch

    def on_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.state.batch = batch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.state.batch = 0


class UpdateEpochStateCallback(_Callback):
    """Sets state.epoch at the end of every epoch to the number of epochs done over every call of
    fit (Keras counts from 0, or from initial_epoch, in each call; the state counts on across
    resets)."""

    def __init__(self, state: Any) -> None:
        """`state`: a State with an `epoch` attribute."""
        super().__init__()
        self.state = state
        self.initial_epoch = self.state.epoch

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        # One past the epoch that ended, so that a reset after state.batch went back to 0 does
        # not repeat it.
        self.state.epoch = self.initial_epoch + epoch + 1
