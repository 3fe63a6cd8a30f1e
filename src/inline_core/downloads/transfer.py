"""One file's transfer into its partial file: resumed from the bytes already there with a range
request, tried again (from where it stopped) when the connection is cut, hashed as it arrives and
verified against what the hub publishes. A mismatch discards the bytes.

What huggingface_hub's own `http_get` lacks here, and the reason this loop exists: progress at a
finer grain than 10 MB, stopping at any chunk when the download is cancelled or the server shuts
down, and the hash computed on the way in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from inline_core.downloads.hashing import StreamHasher, expected_digest
from inline_core.downloads.hub import Hub, RemoteFile, hub_error, is_transient
from inline_core.downloads.interrupt import Interrupt, Stopped
from inline_core.errors import Cancelled, HubUnreachable, InlineError, VerifyFailed

# Tries in a row that bring no new byte before the download fails (any byte resets the count).
MAX_TRIES = 6
BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)


def fetch_file(
    hub: Hub,
    url: str,
    partial: Path,
    remote: RemoteFile,
    on_bytes: Callable[[int], None],
    should_stop: Callable[[], str | None],
    interrupt: Interrupt | None = None,
) -> None:
    """Bring `partial` to the whole of `remote`, verified. `should_stop` answers "cancel" or
    "stop" (raised as `Cancelled` or `Stopped`) or None, and is asked again when `interrupt`
    fires; `on_bytes` gets the bytes held so far."""
    wake = interrupt or Interrupt()
    partial.parent.mkdir(parents=True, exist_ok=True)
    have = partial.stat().st_size if partial.exists() else 0
    if have > remote.size:  # not this file's bytes: start again
        have = 0
    hasher = StreamHasher(remote)
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, have)
            os.lseek(fd, have, os.SEEK_SET)
            hasher.feed_file(partial, have)
            on_bytes(have)
            have = _receive(hub, url, fd, have, remote, hasher, on_bytes, should_stop, wake)
        finally:
            os.close(fd)
        digest = hasher.hexdigest()
    finally:
        hasher.close()
    want = expected_digest(remote)
    if have != remote.size or (want is not None and digest != want):
        partial.unlink(missing_ok=True)
        kind = "sha256" if remote.sha256 else "git blob id"
        raise VerifyFailed(
            f"{remote.path}: the bytes received ({have}, {kind} {digest[:12]}...) are not the file "
            f"the hub publishes ({remote.size} bytes, {kind} {(want or '?')[:12]}...); "
            "they were discarded"
        )


def _receive(
    hub: Hub,
    url: str,
    fd: int,
    have: int,
    remote: RemoteFile,
    hasher: StreamHasher,
    on_bytes: Callable[[int], None],
    should_stop: Callable[[], str | None],
    wake: Interrupt,
) -> int:
    tries = 0
    oid = remote.sha256 or remote.blob_id
    validator = f'"{oid}"' if oid else None  # If-Range: resume only the same file
    while have < remote.size:
        _check(should_stop)
        before = have
        try:
            with hub.stream(url, have, validator) as response:
                wake.watch(response)
                if have > 0 and response.status_code == 200:
                    # The range was ignored (or the file changed): the whole file comes again.
                    raise _Restart()
                for chunk in response.iter_bytes():
                    _check(should_stop)
                    if have + len(chunk) > remote.size:
                        raise VerifyFailed(
                            f"{remote.path}: the hub sent more than its {remote.size} bytes; "
                            "they were discarded"
                        )
                    _write_all(fd, chunk)
                    hasher.feed(chunk)
                    have += len(chunk)
                    on_bytes(have)
        except _Restart:
            return _restart(hub, url, fd, remote, hasher, on_bytes, should_stop, wake)
        except (Cancelled, Stopped, InlineError):
            raise
        except Exception as exc:
            _check(should_stop)  # a cancel or a stop that woke the read ends here
            if not is_transient(exc):
                raise hub_error(exc, f"file {remote.path!r}", hub.endpoint) from exc
            tries = 0 if have > before else tries + 1
            if tries >= MAX_TRIES:
                raise HubUnreachable(
                    f"{remote.path}: the connection to {hub.endpoint} kept failing "
                    f"({type(exc).__name__}) with {have} of {remote.size} bytes received"
                ) from exc
            _pause(BACKOFF_S[min(tries, len(BACKOFF_S) - 1)], should_stop)
            continue
        if have < remote.size:  # the body ended early without an error: a cut, resume from here
            tries = 0 if have > before else tries + 1
            if tries >= MAX_TRIES:
                raise HubUnreachable(f"{remote.path}: the hub keeps ending the file early")
    return have


class _Restart(Exception):
    pass


def _restart(
    hub: Hub,
    url: str,
    fd: int,
    remote: RemoteFile,
    hasher: StreamHasher,
    on_bytes: Callable[[int], None],
    should_stop: Callable[[], str | None],
    wake: Interrupt,
) -> int:
    """Start the file over (the hub did not resume it): a fresh hash over a fresh file."""
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    hasher.restart()
    on_bytes(0)
    return _receive(hub, url, fd, 0, remote, hasher, on_bytes, should_stop, wake)


def _write_all(fd: int, chunk: bytes) -> None:
    view = memoryview(chunk)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _check(should_stop: Callable[[], str | None]) -> None:
    reason = should_stop()
    if reason == "cancel":
        raise Cancelled("the download was cancelled")
    if reason is not None:
        raise Stopped(reason)


def _pause(seconds: float, should_stop: Callable[[], str | None]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _check(should_stop)
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
