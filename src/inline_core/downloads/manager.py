"""`DownloadManager`: downloads submitted, queued, run at most `max_active` at once, cancelled,
and resumed after a restart; the server's routes and `inline-core download` both drive it.

A download is durable from the moment `submit` returns (its record is fsynced). Its files are
fetched into partial files in a hidden staging folder beside where they land; each is verified
against the hub's published size and hash, then handed to the catalog: a file without a folder
is moved into its category as soon as it verifies, a folder is moved into place once all of its
files have (so a diffusers folder never shows up half there). `on_landed` is told each time, so
the catalog rescans and the registry version changes at once.

Events go to the listeners as (download id, event): `progress` (the first bytes of each file,
at most every `PROGRESS_EVERY_S`, and its last), `file_done`, then one of `download_done`, `error`,
`cancelled`. Listeners are called on the download's thread and must not block.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inline_core.downloads.interrupt import Interrupt, Stopped
from inline_core.downloads.live import LiveProgress
from inline_core.downloads.plan import check_request, check_space, plan_files
from inline_core.downloads.records import DownloadRecord, FileRecord, Status, new_download_id
from inline_core.downloads.remote import Listing
from inline_core.downloads.store import DownloadStore, Held
from inline_core.downloads.view import download_json, progress_json
from inline_core.errors import (
    Cancelled,
    Conflict,
    HubRefused,
    InlineError,
    InsufficientStorage,
    NotFound,
    Unavailable,
)

if TYPE_CHECKING:
    from inline_core.downloads.hub import Hub

log = logging.getLogger(__name__)

Listener = Callable[[str, dict[str, Any]], None]
PROGRESS_EVERY_S = 0.25
LISTING_TTL_S = 60.0
HUB_EXTRA_HINT = "downloads need huggingface_hub: pip install 'inline-core[server]'"


@dataclass
class _Active:
    thread: threading.Thread
    live: LiveProgress
    interrupt: Interrupt = field(default_factory=Interrupt)
    cancel: bool = False
    last_event: float = 0.0
    announced: set[int] = field(default_factory=set[int])


class DownloadManager:
    def __init__(
        self,
        models: Path,
        *,
        endpoint: str | None = None,
        max_active: int = 2,
        keep_free_bytes: int = 0,
        on_landed: Callable[[], None] = lambda: None,
    ) -> None:
        self.models = models
        self.endpoint = endpoint
        self.max_active = max(1, max_active)
        self.keep_free_bytes = keep_free_bytes
        self.on_landed = on_landed
        self.store = DownloadStore(models)
        self._records: dict[str, DownloadRecord] = {}
        self._queue: deque[str] = deque()
        self._active: dict[str, _Active] = {}
        self._lock = threading.Condition()
        self._listeners: list[Listener] = []
        self._hub: Hub | None = None
        # Listings asked for by the requirements route (failures too, so an unreachable hub is
        # not waited for on every look).
        self._listings: dict[tuple[str, str | None], tuple[float, Listing | InlineError]] = {}
        self._closing = False

    # -- set-up ------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def hub(self) -> Hub:
        if self._hub is None:
            try:
                from inline_core.downloads.hub import Hub
            except ImportError as exc:
                raise Unavailable(HUB_EXTRA_HINT) from exc
            self._hub = Hub(self.endpoint)
        return self._hub

    def start(self, *, resume: bool = True) -> None:
        """Load the records; with `resume`, queue again every download a stop or a crash left
        unfinished (its partial files are where it resumes from)."""
        with self._lock:
            for record in self.store.load_all():
                self._records[record.id] = record
                if resume and not record.finished:
                    record.status = "queued"  # "running" until a thread of this server runs it
                    self._queue.append(record.id)
            self._dispatch()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the running downloads at their next chunk; they stay unfinished (resumed at the
        next start, from their partial files)."""
        with self._lock:
            self._closing = True
            threads = [a.thread for a in self._active.values()]
            for active in self._active.values():
                active.interrupt.fire()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- asking --------------------------------------------------------------------------------

    def listing(self, repo: str, revision: str | None) -> Listing:
        """The repo's files (sizes, hashes) at `revision`, or the error the hub gave, remembered
        for a minute."""
        key = (repo, revision)
        now = time.monotonic()
        known = self._listings.get(key)
        if known is None or now - known[0] >= LISTING_TTL_S:
            try:
                answer: Listing | InlineError = self.hub().listing(repo, revision)
            except InlineError as exc:
                answer = exc
            known = (now, answer)
            self._listings[key] = known
        if isinstance(known[1], InlineError):
            raise known[1]
        return known[1]

    def submit(
        self,
        repo: str,
        files: Sequence[str],
        category: str,
        *,
        revision: str | None = None,
        folder: str | None = None,
    ) -> dict[str, Any]:
        check_request(category, folder, files)
        listing = self.hub().listing(repo, revision)  # fresh: the files are fetched at its commit
        self._listings[(repo, revision)] = (time.monotonic(), listing)
        planned = plan_files(listing, files, folder)
        if listing.gated and not self.hub().has_token:
            raise HubRefused(
                f"{repo} is gated: accept its terms on the hub, then give the server a token "
                "(HF_TOKEN, or `hf auth login`) and restart it"
            )
        record = DownloadRecord(
            new_download_id(), repo, revision, listing.commit, category, folder, planned
        )
        with self._lock:
            self._check_free_destinations(record)
            self._check_room(record, also_unfinished=True)
            self.store.save(record)  # durable before anyone hears of it
            self._records[record.id] = record
            self._queue.append(record.id)
            self._dispatch()
            return self._json(record)

    def get(self, download_id: str) -> dict[str, Any]:
        with self._lock:
            return self._json(self._record(download_id))

    def list(self, limit: int) -> list[dict[str, Any]]:
        with self._lock:
            newest = sorted(self._records.values(), key=lambda r: r.id, reverse=True)[:limit]
            return [self._json(r) for r in newest]

    def unfinished(self) -> list[DownloadRecord]:
        with self._lock:
            return [r for r in self._records.values() if not r.finished]

    def resume(self, download_id: str) -> None:
        """Queue an unfinished download this manager was started without resuming."""
        with self._lock:
            record = self._record(download_id)
            if not record.finished and download_id not in self._queue:
                if download_id not in self._active:
                    self._queue.append(download_id)
                    self._dispatch()

    def wait(self, download_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the download is finished (or `timeout`); its state then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            record = self._record(download_id)
            while not record.finished and download_id in (*self._queue, *self._active):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._lock.wait(left)
            return self._json(record)

    def cancel(self, download_id: str, wait_s: float = 10.0) -> dict[str, Any]:
        """Cancel a queued download at once, a running one at its next chunk (waited for up to
        `wait_s`); its partial files are removed. 409 once finished."""
        with self._lock:
            record = self._record(download_id)
            if record.finished:
                raise Conflict(f"download {download_id} is already {record.status}")
            active = self._active.get(download_id)
            if active is None:
                if download_id in self._queue:
                    self._queue.remove(download_id)
                self._finish(record, "cancelled", None)
                return self._json(record)
            active.cancel = True
            active.interrupt.fire()
            deadline = time.monotonic() + wait_s
            while download_id in self._active and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())
            return self._json(record)

    # -- internals (callers hold the lock) -----------------------------------------------------

    def _record(self, download_id: str) -> DownloadRecord:
        record = self._records.get(download_id)
        if record is None:
            raise NotFound(f"no download {download_id!r}")
        return record

    def _json(self, record: DownloadRecord) -> dict[str, Any]:
        active = self._active.get(record.id)
        live = active.live if active is not None else self._live_from_disk(record)
        return download_json(record, live, self.models)

    def _live_from_disk(self, record: DownloadRecord) -> LiveProgress:
        return LiveProgress([record.bytes_on_disk(self.models, f) for f in record.files])

    def _check_free_destinations(self, record: DownloadRecord) -> None:
        mine = set(record.destinations(self.models))
        for path in mine:
            if path.exists():
                raise Conflict(
                    f"{path.relative_to(self.models).as_posix()} is already in the models folder"
                )
        for other in self._records.values():
            if not other.finished and mine & set(other.destinations(self.models)):
                raise Conflict(f"download {other.id} is already fetching {other.repo} there")

    def _check_room(self, record: DownloadRecord, *, also_unfinished: bool) -> None:
        needed = record.bytes_total - self._live_from_disk(record).done
        if also_unfinished:  # what the queue ahead of it still has to write
            for other in self._records.values():
                if not other.finished and other.id != record.id:
                    needed += other.bytes_total - self._live_from_disk(other).done
        check_space(record.landing(self.models), needed, self.keep_free_bytes)

    def _dispatch(self) -> None:
        while self._queue and len(self._active) < self.max_active and not self._closing:
            download_id = self._queue.popleft()
            record = self._records[download_id]
            live = self._live_from_disk(record)
            thread = threading.Thread(
                target=self._run, args=(record,), name=f"download-{download_id}", daemon=True
            )
            self._active[download_id] = _Active(thread, live)
            thread.start()

    def _emit(self, download_id: str, event: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            try:
                listener(download_id, event)
            except Exception:
                log.exception("a download listener failed")

    def _finish(self, record: DownloadRecord, status: Status, error: InlineError | None) -> None:
        record.status = status
        record.finished_at = time.time()
        record.error = None if error is None else {"code": error.code, "message": error.message}
        shutil.rmtree(record.staging(self.models), ignore_errors=True)  # partials, or nothing
        self.store.save(record)
        self._lock.notify_all()
        event: dict[str, Any]
        if status == "done":
            event = {"type": "download_done", "download": self._json(record)}
        elif status == "cancelled":
            event = {"type": "cancelled", "downloadId": record.id}
        else:
            event = {"type": "error", "downloadId": record.id, "error": record.error}
        self._emit(record.id, event)

    # -- one download, on its own thread --------------------------------------------------------

    def _run(self, record: DownloadRecord) -> None:
        held: Held | None = None
        outcome: tuple[Status, InlineError | None] | None = None
        try:
            held = self.store.hold(record.id)
            if held is None:
                log.warning("download %s is being fetched by another process", record.id)
                return
            outcome = self._fetch(record)
        except InlineError as exc:
            outcome = ("error", exc)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                outcome = ("error", InsufficientStorage(f"the disk filled up: {exc.strerror}"))
            else:
                outcome = ("error", InlineError(f"writing the download failed: {exc}"))
        except Exception as exc:
            log.exception("download %s failed", record.id)
            outcome = ("error", InlineError(f"the download failed: {type(exc).__name__}: {exc}"))
        finally:
            with self._lock:
                if outcome is not None:
                    self._finish(record, *outcome)
                self._active.pop(record.id, None)
                self._lock.notify_all()
                self._dispatch()
            if held is not None:
                held.release()

    def _fetch(self, record: DownloadRecord) -> tuple[Status, InlineError | None] | None:
        """Fetch, verify and land every file; the outcome, or None when stopped by a shutdown."""
        from inline_core.downloads.transfer import fetch_file  # huggingface_hub, on first use

        hub = self.hub()
        with self._lock:
            self._check_room(record, also_unfinished=False)
            record.status = "running"
            record.started_at = record.started_at or time.time()
            self.store.save(record)
        for index, file in enumerate(record.files):
            if file.done:
                continue
            partial = record.partial(self.models, file)
            interrupt = self._active[record.id].interrupt
            try:
                fetch_file(
                    hub,
                    hub.url(record.repo, record.commit, file.path),
                    partial,
                    file.remote,
                    lambda held, i=index: self._progress(record, i, held),
                    lambda: self._should_stop(record.id),
                    interrupt,
                )
            except Stopped:
                return None
            except Cancelled:
                return ("cancelled", None)
            self._land_file(record, file, partial)
        if record.folder is not None:
            self._land_folder(record)
        return ("done", None)

    def _land_file(self, record: DownloadRecord, file: FileRecord, partial: Path) -> None:
        verified = partial.with_name(partial.name.removesuffix(".partial"))
        os.replace(partial, verified)
        if record.folder is None:
            target = record.landing(self.models) / file.dest
            if target.exists():
                raise Conflict(f"{target} appeared while it was being downloaded; left as it was")
            os.replace(verified, target)
        with self._lock:
            file.done = True
            self.store.save(record)
            active = self._active.get(record.id)
            if active is not None:
                active.live.update(record.files.index(file), file.size)
        if record.folder is None:
            self.on_landed()
        self._emit(record.id, {"type": "file_done", "downloadId": record.id, "file": file.path})

    def _land_folder(self, record: DownloadRecord) -> None:
        target = record.landing(self.models)
        if target.exists():
            raise Conflict(f"{target} appeared while it was being downloaded; left as it was")
        staging = record.staging(self.models)
        os.rename(staging, target)
        self.on_landed()

    def _progress(self, record: DownloadRecord, index: int, held: int) -> None:
        active = self._active.get(record.id)
        if active is None:
            return
        active.live.update(index, held)
        now = time.monotonic()
        first = index not in active.announced and held > 0
        whole = held == record.files[index].size
        if first or whole or now - active.last_event >= PROGRESS_EVERY_S:
            active.announced.add(index)
            active.last_event = now
            self._emit(record.id, progress_json(record, active.live, index))

    def _should_stop(self, download_id: str) -> str | None:
        active = self._active.get(download_id)
        if active is not None and active.cancel:
            return "cancel"
        return "stop" if self._closing else None
