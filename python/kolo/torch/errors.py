"""The exceptions kolo.torch raises, and the mapping from kolo's status codes to them.

The Python classes are Horovod's (horovod.torch raises what its C++ status types become): a
bad argument (kolo's INVALID_ARGUMENT: a name already in flight, an unsupported dtype, a rank
outside the process set) raises ValueError, as Horovod's InvalidArgument status does; every
other failure of an op raises HorovodInternalError, a RuntimeError, as every other failure in
Horovod does (its mismatches and precondition errors included). kolo keeps its status code on
the exception (`code`): ABORTED, UNAVAILABLE, DEADLINE_EXCEEDED, SHUTDOWN and INTERNAL say the
job failed and cannot go on (a lost rank, a deadline); MISMATCH and FAILED_PRECONDITION failed
that op only, and the job goes on. HorovodInternalError, KoloError and HostsUpdatedInterrupt
are kolo.common.errors', the same classes kolo.tensorflow raises.
"""


from __future__ import annotations

from kolo.common.errors import HorovodInternalError, HostsUpdatedInterrupt, KoloError

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt", "KoloError", "KoloValueError",
           "from_status"]


class KoloValueError(ValueError):
    """A bad argument (kolo's INVALID_ARGUMENT), raised as the ValueError Horovod raises."""

    def __init__(self, message: str, code: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.code = code


def from_status(code: object, message: str) -> HorovodInternalError | KoloValueError:
    """The exception for a failed kolo status (called by the native module): KoloValueError
    for INVALID_ARGUMENT, HorovodInternalError for every other code."""
    code = str(code).upper()
    if code == "INVALID_ARGUMENT":
        return KoloValueError(message, code)
    return HorovodInternalError(message, code)
