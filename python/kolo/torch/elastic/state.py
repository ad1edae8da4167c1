"""TorchState: Horovod's elastic state of a PyTorch training process
(horovod.torch.elastic.TorchState names and semantics). Models, optimizers and ElasticSamplers
given to it are kept by handlers (a deep copy of their state_dict at save(), load_state_dict at
restore(), rank 0's parameters, optimizer state and sampler progress at sync()); every other
keyword argument is a plain attribute, kept as ObjectState keeps it.

The handler registry (get_handler_registry / set_handler_registry) maps a type to its handler
class, as Horovod's: a project may add its own. Threading: the training thread's.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import torch

from kolo.common.elastic import ObjectState
from kolo.torch import functions, mpi_ops
from kolo.torch.elastic.sampler import ElasticSampler

if TYPE_CHECKING:
    Registry = list[tuple[type, type["StateHandler"]]]


class StateHandler:
    """Keeps one object of a TorchState: save(), restore() and sync() as State's."""

    def __init__(self, value: Any) -> None:
        """`value`: the object kept."""
        self.value = value

    def save(self) -> None:
        """Saves the object's state to host memory."""
        raise NotImplementedError()

    def restore(self) -> None:
        """Puts back the object's saved state."""
        raise NotImplementedError()

    def sync(self) -> None:
        """Makes the object's state rank 0's (a collective call)."""
        raise NotImplementedError()

    def reset(self) -> None:
        """After a reset, before sync(): nothing by default."""

    def set_value(self, value: Any) -> None:
        """Keeps `value` instead (state.model = new_model), saved at once."""
        self.value = value
        self.save()


class StateDictHandler(StateHandler):
    """An object with state_dict() and load_state_dict(): save() keeps a deep copy of its
    state_dict (so later changes of the object do not reach it), restore() loads it back."""

    def __init__(self, value: Any) -> None:
        """Saves the object's state at once."""
        super().__init__(value)
        self._saved_state = copy.deepcopy(value.state_dict())

    def save(self) -> None:
        """A deep copy of the state_dict."""
        self._saved_state = copy.deepcopy(self.value.state_dict())

    def restore(self) -> None:
        """load_state_dict of the saved copy (a DistributedOptimizer's also forgets the
        reductions of the failed step)."""
        self.value.load_state_dict(self._saved_state)


class ModelStateHandler(StateDictHandler):
    """A torch.nn.Module: its state_dict (parameters and buffers)."""

    def sync(self) -> None:
        """broadcast_parameters of the state_dict from rank 0."""
        functions.broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(StateDictHandler):
    """A torch.optim.Optimizer (a DistributedOptimizer too): its state_dict."""

    def sync(self) -> None:
        """broadcast_optimizer_state from rank 0."""
        functions.broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(StateDictHandler):
    """An ElasticSampler: its epoch and progress."""

    def sync(self) -> None:
        """Loads rank 0's state_dict, which deals the rest of the epoch over the ranks."""
        self.value.load_state_dict(functions.broadcast_object(self.value.state_dict()))

    def reset(self) -> None:
        """Deals the rest of the epoch over the new ranks, also when run() skips the sync
        (hosts only removed), where Horovod's sampler keeps the old ranks' shares."""
        self.value.reset()


_handler_registry: Registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry() -> Registry:
    """The (type, handler class) pairs TorchState tries in order."""
    return _handler_registry


def set_handler_registry(registry: Registry) -> None:
    """Replaces the registry (for TorchStates made after)."""
    global _handler_registry
    _handler_registry = registry


def _handler_for(value: Any) -> StateHandler | None:
    for handled_type, handler_class in _handler_registry:
        if isinstance(value, handled_type):
            return handler_class(value)
    return None


class TorchState(ObjectState):
    """The state of a PyTorch training function for hvd.elastic.run: `model`, `optimizer` and
    every keyword argument become attributes. Models, optimizers and ElasticSamplers are kept by
    their handlers, anything else as a plain value; assigning an attribute of a handled object
    (state.model = other) keeps the new object and saves it."""

    def __init__(self, model: torch.nn.Module | None = None,
                 optimizer: torch.optim.Optimizer | None = None, **kwargs: Any) -> None:
        """See the class; None for model or optimizer makes a plain attribute of None."""
        kwargs.update(model=model, optimizer=optimizer)
        self._handlers: dict[str, StateHandler] = {}
        plain: dict[str, Any] = {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                plain[name] = value
            else:
                self._handlers[name] = handler
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=functions.broadcast_object, get_rank=mpi_ops.rank,
                         **plain)

    def _each_handler(self, method: str) -> None:
        for handler in self._handlers.values():
            getattr(handler, method)()

    def save(self) -> None:
        """Every handler's save, then the plain attributes'."""
        self._each_handler("save")
        super().save()

    def restore(self) -> None:
        """Every handler's restore, then the plain attributes'."""
        self._each_handler("restore")
        super().restore()

    def sync(self) -> None:
        """Every handler's sync (models, optimizers, samplers from rank 0), then the plain
        attributes'."""
        self._each_handler("sync")
        super().sync()

    def reset(self) -> None:
        """Every handler's reset (samplers deal the rest of the epoch over the new ranks)."""
        self._each_handler("reset")

    def __setattr__(self, name: str, value: Any) -> None:
        """Assigning a handled attribute hands the new object to its handler (which saves
        it), as in Horovod."""
        handlers = self.__dict__.get("_handlers")
        if handlers is not None and name in handlers and hasattr(self, name):
            handlers[name].set_value(value)
        super().__setattr__(name, value)
