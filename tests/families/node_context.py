"""The execution context a family harness runs its node in, in process: a run id of its own, the
takes written to a folder, and the cancel token, events sink and live videos a test hands in."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.progress import RunEvent
from inline_core.runtime.video_stream import LiveVideos

_run_ids = itertools.count()


def node_context(
    takes_dir: Path,
    *,
    cancel: CancelToken | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    videos: LiveVideos | None = None,
) -> ExecutionContext:
    """A fresh run's context (events dropped without `on_event`)."""
    return ExecutionContext(
        run_id=f"run{next(_run_ids)}",
        takes=FileTakeStore(takes_dir),
        cancel=cancel or CancelToken(),
        events=on_event or (lambda _event: None),
        videos=videos,
    )
