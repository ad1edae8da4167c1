"""Horovod's Adasum reduction (op=Adasum), computed on every rank from an allgather.

Horovod's CPU Adasum combines the ranks' tensors pairwise in a binary tree: at level 0 rank
2i with rank 2i+1, at level 1 the result of ranks 4i..4i+1 with that of 4i+2..4i+3, and so on,
each pair by

    adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

with the dot product and squared norms summed in float64 and a coefficient left at 1 where a
squared norm is below sqrt(DBL_MIN) (a zero vector). Each tensor of a grouped allreduce is
combined on its own (Horovod computes the products per tensor of a fused buffer). Between
levels the values are rounded to the tensor's dtype, as Horovod's in-place buffers are.

kolo has no Adasum collective: every rank allgathers the (prescaled) tensors and runs the same
tree over the same bytes, so every rank gets a bit-identical result. Cost: each rank receives
size x the tensor (Horovod's vector-halving scheme receives about 2x) and does size - 1 pairwise
combinations of the whole tensor; fine for a few ranks, not for large jobs with large models.
As in Horovod, the job size must be a power of two and only the global process set is allowed;
the dtypes are float16, bfloat16, float32 and float64.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from collections.abc import Sequence

# Horovod's threshold below which a squared norm counts as zero: sqrt(DBL_MIN).
_ZERO_NORM_SQUARED = math.sqrt(sys.float_info.min)

_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def is_power_of_two(number: int) -> bool:
    """Whether `number` is 1, 2, 4, ..."""
    return number > 0 and number & (number - 1) == 0


def check(tensor: torch.Tensor, process_set_id: int, job_size: int) -> None:
    """Raises what Horovod raises for an Adasum it would not run."""
    if process_set_id != 0:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    if not is_power_of_two(job_size):
        raise NotImplementedError("Running Adasum with non-power of 2 ranks is not supported "
                                  "yet.")
    if tensor.dtype not in _DTYPES:
        raise TypeError("Adasum needs a floating point tensor (float16, bfloat16, float32, "
                        "float64), got %s" % tensor.dtype)


def pair(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Horovod's pairwise combination of two tensors of the same shape and dtype."""
    a64, b64 = a.double().reshape(-1), b.double().reshape(-1)
    dot = float(torch.dot(a64, b64))
    a_norm_squared = float(torch.dot(a64, a64))
    b_norm_squared = float(torch.dot(b64, b64))
    a_coeff = 1.0 - dot / a_norm_squared * 0.5 if a_norm_squared >= _ZERO_NORM_SQUARED else 1.0
    b_coeff = 1.0 - dot / b_norm_squared * 0.5 if b_norm_squared >= _ZERO_NORM_SQUARED else 1.0
    return (a_coeff * a.double() + b_coeff * b.double()).to(a.dtype)


def tree(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Combines the ranks' tensors (a list in rank order, a power of two long) level by level,
    neighbours first, as Horovod's recursive pairing does."""
    level = list(tensors)
    while len(level) > 1:
        level = [pair(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def reduce_gathered(gathered: torch.Tensor, shape: Sequence[int],
                    postscale_factor: float) -> torch.Tensor:
    """The Adasum of an allgather of every rank's tensor flattened to one row: `gathered` has
    one row per rank. Returns a tensor of `shape` (postscaled)."""
    result = tree(list(gathered.unbind(0))).reshape(shape)
    if postscale_factor != 1.0:
        result = result * postscale_factor
    return result
