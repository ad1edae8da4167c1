"""Horovod's Keras callbacks (horovod/tensorflow/keras/callbacks.py, horovod/_keras/callbacks.py)
on kolo, for Keras 3 and tf-keras: BroadcastGlobalVariablesCallback, MetricAverageCallback,
LearningRateScheduleCallback, LearningRateWarmupCallback and BestModelCheckpoint. They derive
from tf.keras's Callback, which is Keras 3's, or tf-keras's under TF_USE_LEGACY_KERAS=1."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tensorflow as tf

from kolo.tensorflow import collectives as _collectives
from kolo.tensorflow import mpi_ops as _mpi_ops
from kolo.tensorflow.functions import broadcast_variables, optimizer_variables
from kolo.tensorflow.gradient_tape import variable_key

if TYPE_CHECKING:
    from collections.abc import Callable

_keras: Any = tf.keras
_Callback: Any = _keras.callbacks.Callback  # Keras 3's, or tf-keras's: untyped
_ModelCheckpoint: Any = _keras.callbacks.ModelCheckpoint


def _value(variable: Any) -> float:
    return float(variable.numpy() if hasattr(variable, "numpy")
                 else _keras.backend.get_value(variable))


def _assignable(value: Any) -> bool:
    return hasattr(value, "assign")


class BroadcastGlobalVariablesCallback(_Callback):
    """Broadcasts the model's and the optimizer's variables from root_rank at the end of the
    first batch, so that every rank trains from the same state (Horovod's)."""

    def __init__(self, root_rank: int, device: str = "", local_variables: Any = None) -> None:
        """`root_rank`: whose values every rank takes; `device` is accepted (kolo's ops run on
        the CPU); `local_variables`: a variable or a list of them that are not broadcast."""
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.broadcast_done = False
        self._local_vars: set[Any] = set()
        if local_variables is None:
            local_variables = []
        elif not isinstance(local_variables, (list, tuple)):
            local_variables = [local_variables]
        for var in local_variables:
            self.register_local_var(var)

    def register_local_var(self, var: Any) -> None:
        """`var` is not broadcast."""
        self._local_vars.add(variable_key(var))

    def on_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.broadcast_done:
            return
        model_variables = [v for v in self.model.variables
                           if variable_key(v) not in self._local_vars]
        broadcast_variables(model_variables, root_rank=self.root_rank)
        broadcast_variables(optimizer_variables(self.model.optimizer), root_rank=self.root_rank)
        self.broadcast_done = True

    on_train_batch_end = on_batch_end


class MetricAverageCallback(_Callback):
    """Averages the epoch's metrics (logs) over the ranks at the end of every epoch; put it
    before callbacks that read them (ReduceLROnPlateau, TensorBoard, ...)."""

    def __init__(self, device: str = "") -> None:
        """`device` is accepted (kolo's ops run on the CPU)."""
        super().__init__()
        self.device = device

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if not logs:
            return
        for metric, value in sorted(logs.items()):  # the same order on every rank
            reduced = _collectives.allreduce(tf.constant(value, dtype=tf.float64),
                                             name="MetricAverageCallback.%s" % metric)
            logs[metric] = float(reduced.numpy())


class LearningRateScheduleCallback(_Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) from start_epoch until
    end_epoch (exclusive): at each epoch's start (staircase) or each batch's (epoch then counts
    fractions of an epoch). With momentum_correction, an optimizer whose momentum is a variable
    (tf-keras's) has it scaled by new_lr / old_lr for the batch where the rate changes (Keras 3
    optimizers keep momentum as a Python number, baked into the compiled step: left alone)."""

    def __init__(self, initial_lr: float, multiplier: float | Callable[[float], float],
                 start_epoch: int = 0, end_epoch: int | None = None, staircase: bool = True,
                 momentum_correction: bool = True, steps_per_epoch: int | None = None) -> None:
        """Horovod's arguments (see the class): multiplier is a number (then
        multiplier ** (epoch - start_epoch)) or a function of the epoch."""
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.initial_lr = initial_lr
        self.restore_momentum: float | None = None
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch: int | None = None
        if not callable(multiplier):
            factor = multiplier
            self.multiplier: Callable[[float], float] = \
                lambda epoch: factor ** (epoch - start_epoch)
        else:
            self.multiplier = multiplier

    def _autodetect_steps_per_epoch(self) -> int:
        if self.params.get("steps"):
            return self.params["steps"]
        if self.params.get("samples") and self.params.get("batch_size"):
            return self.params["samples"] // self.params["batch_size"]
        raise ValueError("Could not autodetect the number of steps per epoch. Please specify the "
                         "steps_per_epoch parameter to the %s()." % type(self).__name__)

    def _adjust_learning_rate(self, epoch: float) -> None:
        optimizer = self.model.optimizer
        old_lr = _value(optimizer.learning_rate)
        new_lr = self.initial_lr * self.multiplier(epoch)
        if _assignable(optimizer.learning_rate):
            optimizer.learning_rate.assign(new_lr)
        else:
            optimizer.learning_rate = new_lr
        momentum = getattr(optimizer, "momentum", None)
        if self.momentum_correction and momentum is not None and _assignable(momentum) and \
                old_lr != 0:
            self.restore_momentum = _value(momentum)
            momentum.assign(self.restore_momentum * new_lr / old_lr)

    def _restore_momentum_if_needed(self) -> None:
        if self.restore_momentum:
            self.model.optimizer.momentum.assign(self.restore_momentum)
            self.restore_momentum = None

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.current_epoch = epoch

    def on_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        epoch = self.current_epoch
        if epoch is None or epoch < self.start_epoch or \
                (self.end_epoch is not None and epoch >= self.end_epoch):
            return
        if self.staircase and batch == 0:
            self._adjust_learning_rate(epoch)
        elif not self.staircase:
            self._adjust_learning_rate(epoch + float(batch) / self._steps_per_epoch())

    def _steps_per_epoch(self) -> int:
        """steps_per_epoch, given or (staircase=False) found at the start of training."""
        if not self.steps_per_epoch:
            raise ValueError("%s: steps_per_epoch is not known before training starts"
                             % type(self).__name__)
        return self.steps_per_epoch

    def on_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._restore_momentum_if_needed()

    on_train_batch_begin = on_batch_begin
    on_train_batch_end = on_batch_end

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if logs is not None:
            logs["lr"] = _value(self.model.optimizer.learning_rate)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Horovod's gradual warmup: the learning rate goes from initial_lr / size to initial_lr
    over warmup_epochs, batch by batch (lr'(epoch) = lr / size * (epoch * (size - 1) / warmup
    + 1))."""

    def __init__(self, initial_lr: float, warmup_epochs: int = 5,
                 momentum_correction: bool = True, steps_per_epoch: int | None = None,
                 verbose: int = 0) -> None:
        """Horovod's arguments (see the class)."""
        def multiplier(epoch: float) -> float:
            # Round numbers at the end of each epoch, as Horovod's.
            epoch += 1. / self._steps_per_epoch()
            size = _mpi_ops.size()
            return 1. / size * (epoch * (size - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        if epoch == (self.end_epoch or 0) - 1 and self.verbose > 0 and _mpi_ops.rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g." %
                  (epoch + 1, _value(self.model.optimizer.learning_rate)))


class BestModelCheckpoint(_ModelCheckpoint):
    """ModelCheckpoint that saves only the best model (Horovod's), with Horovod's arguments in
    Horovod's order: BestModelCheckpoint('val_acc') monitors val_acc. Horovod leaves filepath
    to be set later (its Spark estimator sets `.filepath`); kolo takes it as a keyword too.
    Keras 3 wants one when the callback is made, so without it a placeholder is given and
    filepath is None again; saving without one raises ValueError saying so."""

    def __init__(self, monitor: str = "val_loss", verbose: int = 0,
                 save_weights_only: bool = False, mode: str = "auto",
                 save_freq: str | int = "epoch", *, filepath: str | None = None) -> None:
        """Horovod's arguments (see the class); `filepath`: where to save."""
        placeholder = "best_model.weights.h5" if save_weights_only else "best_model.keras"
        super().__init__(filepath=filepath or placeholder, monitor=monitor, verbose=verbose,
                         save_best_only=True, save_weights_only=save_weights_only, mode=mode,
                         save_freq=save_freq)
        if filepath is None:
            self.filepath = None

    def _get_file_path(self, *args: Any, **kwargs: Any) -> str:
        if self.filepath is None:
            raise ValueError("BestModelCheckpoint has no filepath to save the best model to: "
                             "give filepath=... or set its .filepath before training")
        return super()._get_file_path(*args, **kwargs)
