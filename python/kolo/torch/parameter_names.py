"""named_parameters of the DistributedOptimizers, checked as Horovod checks them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    import torch


def check_names(param_groups: list[dict[str, Any]],
                named_parameters: Iterable[tuple[str, torch.Tensor]] | None
                ) -> dict[torch.Tensor, str]:
    """Horovod's checks of named_parameters (tuples, unique names, every parameter named);
    returns {parameter: name} (without names: allreduce.noname.<i>)."""
    all_params = [p for group in param_groups for p in group["params"]]
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [("allreduce.noname.%s" % i, p) for i, p in enumerate(all_params)]
    if any(not isinstance(entry, tuple) for entry in named_parameters):
        raise ValueError("named_parameters should be a sequence of tuples (name, "
                         "parameter), usually produced by model.named_parameters().")
    names = [name for name, _ in named_parameters]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError("Parameter names in named_parameters must be unique. Found "
                         "duplicates: %s" % ", ".join(duplicates))
    named_ids = {id(p) for _, p in named_parameters}
    unnamed = [p for p in all_params if id(p) not in named_ids]
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more model "
                         "parameters were not named. Python object ids: %s"
                         % ", ".join(str(id(p)) for p in unnamed))
    return {p: name for name, p in named_parameters}
