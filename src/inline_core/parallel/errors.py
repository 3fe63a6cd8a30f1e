"""Client-visible failures of the worker group (all `InlineError`s)."""

from __future__ import annotations

from inline_core.errors import InlineError


class WorkerGroupError(InlineError):
    """The group failed while it held a job: a rank died, hung, or the group lost its socket."""

    code = "worker_group_failed"
    status = 503


class WorkerStartError(WorkerGroupError):
    """The group could not start (bad model path, import error, no rendezvous, timeout)."""

    code = "worker_group_start_failed"
    status = 503


class RemoteJobError(InlineError):
    """The job itself raised inside the ranks; carries the remote error's code and status."""

    def __init__(self, message: str, *, code: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
