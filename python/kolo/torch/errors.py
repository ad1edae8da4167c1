"""The exceptions kolo.torch raises, and the mapping from kolo's status codes to them.

The Python classes are Horovod's (horovod.torch raises what its C++ status types become): a
bad argument (kolo's INVALID_ARGUMENT: a name already in flight, an unsupported dtype, a rank
outside the process set) raises ValueError, as Horovod's InvalidArgument status does; every
other failure of an op raises HorovodInternalError, a RuntimeError, as every other failure in
Horovod does (its mismatches and precondition errors included). kolo keeps its status code on
the exception (`code`): ABORTED, UNAVAILABLE, DEADLINE_EXCEEDED, SHUTDOWN and INTERNAL say the
job failed and cannot go on (a lost rank, a deadline); MISMATCH and FAILED_PRECONDITION failed
that op only, and the job goes on.
"""


class KoloError(RuntimeError):
    """A failed kolo op or call; `code` is kolo's status code name ("MISMATCH", ...)."""

    def __init__(self, message, code="UNKNOWN"):
        super().__init__(message)
        self.code = code


class HorovodInternalError(KoloError):
    """An op or call failed (Horovod's class for it); `code` says whether the job failed
    (job_failed) or only that op."""

    @property
    def job_failed(self):
        return self.code in _JOB_FATAL


class KoloValueError(ValueError):
    """A bad argument (kolo's INVALID_ARGUMENT), raised as the ValueError Horovod raises."""

    def __init__(self, message, code="INVALID_ARGUMENT"):
        super().__init__(message)
        self.code = code


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod's elastic signal; kolo has no elastic mode, so it is never raised."""


_JOB_FATAL = {"ABORTED", "UNAVAILABLE", "DEADLINE_EXCEEDED", "SHUTDOWN", "INTERNAL"}


def from_status(code, message):
    """The exception for a failed kolo status (called by the native module)."""
    code = str(code).upper()
    if code == "INVALID_ARGUMENT":
        return KoloValueError(message, code)
    return HorovodInternalError(message, code)
