"""SyncBatchNorm: Horovod's batch normalization over the batch of every rank.

In training (and whenever track_running_stats is False) with more than one rank, each rank
computes its batch's per-channel mean, biased variance and row count; one allgather gives every
rank all of them, from which it forms the global mean and variance (the variance of the
concatenated batch: the ranks' variances plus the spread of their means, weighted by counts).
The running statistics are updated with the global ones (the unbiased variance), so they stay
the same on every rank. Backward: each rank sums dy and dy * (x - mean) over its rows, one Sum
allreduce makes them global, and the input gradient is that of batch norm on the concatenated
batch. The weight and bias gradients stay local, as in Horovod and torch.nn.SyncBatchNorm:
DistributedOptimizer averages them. Eval mode with running statistics and a 1-rank job run
plain batch norm.

Horovod sends the ranks' inverse standard deviations; kolo sends the variances (the same
information without the eps round trip). Horovod's version runs on GPU tensors only (torch's
CUDA kernels); this one computes with torch operations, so CPU tensors work too. The
statistics are computed in float32 (float64 for float64 inputs).
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from kolo.torch import mpi_ops
from kolo.torch.mpi_ops import Sum


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose statistics cover every rank's batch (Horovod's arguments;
    input (N, C, ...))."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True) -> None:
        """torch.nn.BatchNorm's arguments: `num_features` channels (C); `momentum` None for a
        cumulative average of the running statistics."""
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Normalizes `input` (N, C, ...) with the statistics of every rank's batch in training
        (this rank's running statistics in eval mode). Raises ValueError for an input of
        fewer than 2 dimensions, or for a single value per channel over every rank."""
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            tracked = cast(torch.Tensor, self.num_batches_tracked)  # tracking: a tensor
            tracked.add_(1)
            if self.momentum is None:  # a cumulative average, as torch's BatchNorm
                factor = 1.0 / float(tracked)
        batch_statistics = self.training or not self.track_running_stats
        if not batch_statistics or mpi_ops.size() == 1:
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, batch_statistics, factor, self.eps)
        return _SyncBatchNorm.apply(input, self.weight, self.bias, self.running_mean,
                                    self.running_var, self.eps, factor)


def _channel_view(values: torch.Tensor, dims: int) -> torch.Tensor:
    """values (C,) shaped to broadcast against an (N, C, ...) tensor of `dims` dimensions."""
    return values.reshape([1, -1] + [1] * (dims - 2))


class _SyncBatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input: torch.Tensor, weight: torch.Tensor | None,
                bias: torch.Tensor | None, running_mean: torch.Tensor | None,
                running_var: torch.Tensor | None, eps: float, momentum: float) -> torch.Tensor:
        channels = input.size(1)
        dtype = torch.float64 if input.dtype == torch.float64 else torch.float32
        x = input.contiguous().to(dtype)
        reduce_dims = [0] + list(range(2, input.dim()))
        count = x.numel() // channels
        if count > 0:
            mean = x.mean(reduce_dims)
            var = x.var(reduce_dims, unbiased=False)
        else:  # an empty batch on this rank still takes part
            mean = var = x.new_zeros(channels)
        local = torch.cat([x.new_tensor([count]), mean, var]).unsqueeze(0)
        gathered = mpi_ops.synchronize(mpi_ops.allgather_async(
            local, name="sync_batch_norm.stats.%d" % channels))
        counts, means, variances = gathered[:, :1], gathered[:, 1:channels + 1], \
            gathered[:, channels + 1:]
        total = float(counts.sum())
        if total <= 1:
            raise ValueError("Expected more than 1 value per channel when training, got %d "
                             "over every rank" % int(total))
        mean = (counts * means).sum(0) / total
        var = (counts * (variances + (means - mean) ** 2)).sum(0) / total
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
                unbiased = var * (total / (total - 1))
                running_var = cast(torch.Tensor, running_var)  # kept beside running_mean
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype),
                                                    alpha=momentum)

        normalized = (x - _channel_view(mean, x.dim())) * _channel_view(invstd, x.dim())
        if weight is not None:
            normalized = normalized * _channel_view(weight.to(dtype), x.dim())
        if bias is not None:
            normalized = normalized + _channel_view(bias.to(dtype), x.dim())
        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.total, ctx.input_dtype = total, input.dtype
        return normalized.to(input.dtype)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, mean, invstd = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[0:3]
        dims, channels = x.dim(), x.size(1)
        reduce_dims = [0] + list(range(2, dims))
        dy = grad_output.contiguous().to(x.dtype)
        xmu = x - _channel_view(mean, dims)
        sum_dy = dy.sum(reduce_dims)
        sum_dy_xmu = (dy * xmu).sum(reduce_dims)

        grad_input = grad_weight = grad_bias = None
        if need_input:
            sums = mpi_ops.synchronize(mpi_ops.allreduce_async(
                torch.cat([sum_dy, sum_dy_xmu]), op=Sum,
                name="sync_batch_norm.grads.%d" % channels))
            mean_dy = _channel_view(sums[:channels] / ctx.total, dims)
            mean_dy_xmu = _channel_view(sums[channels:] / ctx.total, dims)
            scale = invstd if weight is None else invstd * weight.to(x.dtype)
            grad_input = (dy - mean_dy - xmu * _channel_view(invstd * invstd, dims) *
                          mean_dy_xmu) * _channel_view(scale, dims)
            grad_input = grad_input.to(ctx.input_dtype)
        if weight is not None and need_weight:
            grad_weight = (sum_dy_xmu * invstd).to(weight.dtype)
        if weight is not None and need_bias:
            grad_bias = sum_dy.to(weight.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None
