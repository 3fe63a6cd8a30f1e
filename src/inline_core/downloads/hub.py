"""The hub, through huggingface_hub: a repo's listing with each file's size and hashes, file URLs,
auth headers, one byte stream (a range of a file), and the hub's errors as `InlineError`s.

`HF_ENDPOINT` (a mirror, a local hub) is passed in explicitly, since huggingface_hub reads it once
at import. The token for gated repos is huggingface_hub's own (`HF_TOKEN`, else the standard
token file), read on each request: it is never kept, logged or put in a message here.

Imported on the first download, not at server start (huggingface_hub takes a while to import).
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import httpx2
from huggingface_hub import HfApi, get_session, get_token, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status  # pyright: ignore[reportUnknownVariableType]

from inline_core.downloads.remote import Listing, RemoteFile
from inline_core.errors import HubRefused, HubUnreachable, InlineError, NotFound

DEFAULT_ENDPOINT = "https://huggingface.co"
# Seconds to connect, or to wait for the next bytes of a stream, before the try counts as cut.
READ_TIMEOUT_S = 30.0
LISTING_TIMEOUT_S = 30.0


class Hub:
    def __init__(self, endpoint: str | None = None) -> None:
        self.endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
        self._api = HfApi(endpoint=self.endpoint)

    @property
    def has_token(self) -> bool:
        return get_token() is not None

    def listing(self, repo: str, revision: str | None) -> Listing:
        """The repo's files at `revision` (None: its default branch), with sizes and hashes."""
        try:
            info = self._api.model_info(
                repo, revision=revision, files_metadata=True, timeout=LISTING_TIMEOUT_S
            )
        except Exception as exc:
            raise hub_error(exc, f"repo {repo!r}", self.endpoint) from exc
        files: dict[str, RemoteFile] = {}
        for sibling in info.siblings or []:
            lfs: Any = sibling.lfs
            size = lfs.size if lfs is not None else sibling.size
            files[sibling.rfilename] = RemoteFile(
                sibling.rfilename,
                int(size or 0),
                str(lfs.sha256) if lfs is not None else None,
                sibling.blob_id,
            )
        return Listing(repo, str(info.sha or revision or "main"), bool(info.gated), files)

    def url(self, repo: str, commit: str, path: str) -> str:
        return hf_hub_url(repo, path, revision=commit, endpoint=self.endpoint)

    @contextmanager
    def stream(self, url: str, start: int, validator: str | None) -> Generator[httpx2.Response]:
        """The file's bytes from `start` on: a 206 for the range, or a 200 with the whole file
        when the hub ignores the range or the file is no longer the one `validator` names."""
        headers = build_hf_headers(headers={"Accept-Encoding": "identity"})
        if start > 0:
            headers["Range"] = f"bytes={start}-"
            if validator:
                headers["If-Range"] = validator
        timeout = httpx2.Timeout(READ_TIMEOUT_S)
        with get_session().stream("GET", url, headers=headers, timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            yield response


def is_transient(exc: BaseException) -> bool:
    """A cut, a timeout, a refused connection or a hub hiccup: worth another try."""
    if isinstance(exc, OfflineModeIsEnabled):
        return False
    if isinstance(exc, httpx2.TransportError):
        return True
    status = _status(exc)
    return status is not None and (status >= 500 or status in (408, 429))


def hub_error(exc: BaseException, what: str, endpoint: str) -> InlineError:
    """What the hub said, as the error a client gets (no token, no headers in it)."""
    if isinstance(exc, InlineError):
        return exc
    if isinstance(exc, GatedRepoError) or _status(exc) in (401, 403):
        return HubRefused(
            f"the hub at {endpoint} refused {what}: it is gated or private. Accept its terms on "
            "the hub, then give the server a token (HF_TOKEN, or `hf auth login`) and restart it"
        )
    if isinstance(exc, RevisionNotFoundError):
        return NotFound(f"the hub at {endpoint} has no such revision of {what}")
    if isinstance(exc, RepositoryNotFoundError):
        return NotFound(f"the hub at {endpoint} has no {what}")
    if isinstance(exc, EntryNotFoundError):
        return NotFound(f"the hub at {endpoint} has no {what}")
    if isinstance(exc, OfflineModeIsEnabled):
        return HubUnreachable(f"cannot fetch {what}: HF_HUB_OFFLINE is set")
    if isinstance(exc, HfHubHTTPError):
        return HubUnreachable(f"the hub at {endpoint} answered {_status(exc)} for {what}")
    if isinstance(exc, httpx2.TransportError):
        name = type(exc).__name__
        return HubUnreachable(f"cannot reach the hub at {endpoint} for {what}: {name}")
    return HubUnreachable(f"fetching {what} from {endpoint} failed: {type(exc).__name__}")


def _status(exc: BaseException) -> int | None:
    if isinstance(exc, HfHubHTTPError):
        return int(exc.response.status_code)
    return None
