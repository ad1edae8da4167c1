"""Gradient compression for allreduce (Horovod's Compression.none and Compression.fp16)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class Compressor:
    """Compresses a tensor before the allreduce and restores it after."""

    @staticmethod
    def compress(tensor: tf.Tensor) -> tuple[tf.Tensor, Any]:
        """Returns (compressed tensor, context for decompress)."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor: tf.Tensor, ctx: Any) -> tf.Tensor:
        """The tensor compress() made, restored with its context."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """No compression: the tensor travels as it is."""

    @staticmethod
    def compress(tensor: tf.Tensor) -> tuple[tf.Tensor, Any]:
        """(tensor, None)."""
        return tensor, None

    @staticmethod
    def decompress(tensor: tf.Tensor, ctx: Any) -> tf.Tensor:
        """The tensor itself."""
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 (half the bytes); others as they are."""

    @staticmethod
    def compress(tensor: tf.Tensor) -> tuple[tf.Tensor, Any]:
        """(the tensor cast to float16 when it is floating point, its dtype)."""
        if tensor.dtype.is_floating:
            return tf.cast(tensor, dtype=tf.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor: tf.Tensor, ctx: Any) -> tf.Tensor:
        """The tensor cast back to its dtype `ctx`."""
        return tensor if ctx is None or tensor.dtype == ctx else tf.cast(tensor, dtype=ctx)


class Compression:
    """Horovod's choice of compressor: Compression.none or Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor
