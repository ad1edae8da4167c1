"""The exceptions kolo's bindings raise for calls that are not framework ops, and the mapping
from kolo's status codes to them.

Horovod raises HorovodInternalError when the job itself failed (a lost rank, a deadline): the job
cannot go on and a training loop catches it to restart. kolo's ABORTED, UNAVAILABLE,
DEADLINE_EXCEEDED, SHUTDOWN and INTERNAL are that. Every other failed status (a mismatch between
ranks, a bad argument, a call before init) raises KoloError, a RuntimeError as in Horovod, and the
job goes on.
"""

from __future__ import annotations

# The status codes that say the job failed and cannot go on.
JOB_FATAL: frozenset[str] = frozenset({"ABORTED", "UNAVAILABLE", "DEADLINE_EXCEEDED", "SHUTDOWN",
                                       "INTERNAL"})


class KoloError(RuntimeError):
    """A failed kolo call; `code` is kolo's status code name ("MISMATCH", ...)."""

    def __init__(self, message: str, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.code = code


class HorovodInternalError(KoloError):
    """Horovod's class for a failed op or job, the one class every kolo binding raises (and
    re-exports where Horovod's scripts import it from: kolo.common.exceptions, kolo.torch,
    kolo.torch.mpi_ops, kolo.tensorflow, kolo.tensorflow.elastic, kolo.keras). `code` is kolo's
    status code name; job_failed says whether the job failed and cannot go on (a lost rank, a
    deadline, shutdown) or only that op did (kolo.torch raises it for a mismatch between ranks
    too, as horovod.torch does)."""

    @property
    def job_failed(self) -> bool:
        """Whether the job failed and cannot go on (a lost rank, a deadline, shutdown)."""
        return self.code in JOB_FATAL


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod's elastic signal: the job's hosts changed (kolorun's elastic driver said so at a
    commit), so every rank leaves its training function at the same commit and the job
    re-forms, keeping its state (hvd.elastic.run). `skip_sync`: only hosts were removed, so no
    new worker needs the state and the re-formed job skips state.sync(), as in Horovod. Raised
    only in an elastic job (kolorun --min-np/--max-np/--host-discovery-script)."""

    def __init__(self, skip_sync: bool = False) -> None:
        super().__init__("the job's hosts changed (%s)" % (
            "removed: the job re-forms without them" if skip_sync
            else "added: the job re-forms with them"))
        self.skip_sync = skip_sync


def from_status(code: object, message: str) -> KoloError:
    """The exception for a failed kolo status: HorovodInternalError for a code in JOB_FATAL,
    else KoloError; `code` is kolo's status code name (any case)."""
    code = str(code).upper()
    cls = HorovodInternalError if code in JOB_FATAL else KoloError
    return cls(message, code)
