"""Gradient compression for allreduce (Horovod's Compression.none and Compression.fp16)."""

from __future__ import annotations

from typing import Any

import torch


class Compressor:
    """Compresses a tensor before the allreduce and restores it after."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """Returns (compressed tensor, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """Returns the tensor compress() made, restored with compress()'s context."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression: tensors travel as they are."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """Returns (`tensor`, None)."""
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """Returns `tensor`."""
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 (half the bytes); others as they are."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """Returns (the float16 tensor, the original dtype)."""
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """Returns `tensor` in the dtype `ctx` (compress()'s context) names."""
        return tensor if ctx is None or tensor.dtype == ctx else tensor.type(ctx)


class Compression:
    """The compressors DistributedOptimizer and allreduce take (compression=...)."""

    none = NoneCompressor
    fp16 = FP16Compressor
