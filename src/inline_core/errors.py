"""The error hierarchy. Every failure a client can see is one of these, with a code and a status.

The server turns an `InlineError` into `{"error": {"code", "message", "nodeId"?}}` with `status`.
Anything else that escapes is an internal error (500 envelope, never a traceback).
"""

from __future__ import annotations


class InlineError(Exception):
    """Base of every client-visible error."""

    code: str = "internal"
    status: int = 500

    def __init__(self, message: str, *, node_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.node_id = node_id

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {"code": self.code, "message": self.message}
        if self.node_id is not None:
            body["nodeId"] = self.node_id
        return {"error": body}


class InvalidRequest(InlineError):
    code = "invalid_request"
    status = 422


class InvalidGraph(InlineError):
    code = "invalid_graph"
    status = 422


class ModelMissing(InlineError):
    """A model file a node needs is not present (or a runtime extra is not installed)."""

    code = "model_missing"
    status = 422


class NotFound(InlineError):
    code = "not_found"
    status = 404


class NoPreview(NotFound):
    """A run has no step preview to serve: none rendered yet, previews off, or it runs on
    another server of the fleet (previews are delivered, never stored)."""

    code = "no_preview"


class Conflict(InlineError):
    code = "conflict"
    status = 409


class Unauthorized(InlineError):
    code = "unauthorized"
    status = 401


class PayloadTooLarge(InlineError):
    code = "payload_too_large"
    status = 413


class UnsupportedMedia(InlineError):
    code = "unsupported_media_type"
    status = 415


class Busy(InlineError):
    """The queue is full; the client should retry after `retry_after_s`."""

    code = "busy"
    status = 429

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RunFailed(InlineError):
    """A node failed while the run executed (reported on the run, never as an HTTP status)."""

    code = "run_failed"
    status = 500


class Cancelled(InlineError):
    """Raised inside a run when its cancel token fires; ends the run as `cancelled`."""

    code = "cancelled"
    status = 409


class Unavailable(InlineError):
    """The service cannot take the work now (e.g. the sampler was closed at shutdown)."""

    code = "unavailable"
    status = 503


class InsufficientStorage(InlineError):
    """The disk (or the configured budget) has no room for what was asked: an upload beyond the
    free-space floor or the assets budget, or a take the full disk could not hold."""

    code = "insufficient_storage"
    status = 507


class RangeNotSatisfiable(InlineError):
    """A `Range` header that names no bytes of the file (answered 416 with its size)."""

    code = "range_not_satisfiable"
    status = 416

    def __init__(self, message: str, *, size: int) -> None:
        super().__init__(message)
        self.size = size


class HubRefused(InlineError):
    """The model hub refused a download: a gated or private repo, and no token (or one without
    access). Not 401: the client's own token to this server is fine."""

    code = "hub_access_denied"
    status = 403


class HubUnreachable(InlineError):
    """The model hub could not be reached, or answered with an error of its own."""

    code = "hub_unreachable"
    status = 502


class VerifyFailed(InlineError):
    """A downloaded file's size or hash is not what the hub publishes (reported on the download,
    its bytes discarded)."""

    code = "verify_failed"
    status = 502
