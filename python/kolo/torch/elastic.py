"""hvd.elastic: Horovod's elastic training, which kolo does not support.

kolo's job has a fixed set of ranks from start to end (a lost rank fails the job with
HorovodInternalError), so there is nothing for hvd.elastic.run, TorchState, ObjectState or the
samplers to resume. The module exists so that `hvd.elastic` resolves as in Horovod; any name
taken from it raises NotImplementedError saying so.
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """Raises NotImplementedError for every Horovod elastic name (AttributeError for the
    module protocol's dunder lookups)."""
    if name.startswith("__"):  # module protocol lookups (__path__, __wrapped__, ...)
        raise AttributeError(name)
    raise NotImplementedError(
        "kolo.torch.elastic.%s: kolo does not support Horovod's elastic training "
        "(hvd.elastic.run, TorchState, ObjectState, ElasticSampler); run a fixed-size job "
        "with kolorun and restart it from a checkpoint when a rank is lost" % name)
