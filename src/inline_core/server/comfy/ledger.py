"""The prompts ComfyUI's API answers for: our runs that came from a ComfyUI prompt, read from the
run store (so any server of a fleet, and a restarted one, answers for every prompt).

Finished runs never change, so what is read of them is kept (bounded); a run that is no prompt's
is remembered as such. `/history`'s clear and delete hide prompts (the runs and their takes stay):
what is hidden is kept in the data folder.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from inline_core.server.comfy.prompt_meta import PromptMeta, read_meta
from inline_core.server.manager import RunManager
from inline_core.server.run_state import RunRecord, RunStatus
from inline_core.takes import Take

KEPT = 4096  # finished runs whose reading is kept
SCAN = 500  # recent runs looked at for the history and the job list


@dataclass(frozen=True)
class PromptRun:
    meta: PromptMeta
    record: RunRecord
    takes: list[Take]


class Hidden:
    """Prompts cleared from or deleted in `/history`: every prompt created before the last clear,
    and the ids deleted one by one; kept in `hidden.json`."""

    def __init__(self, folder: Path) -> None:
        self._path = folder / "hidden.json"
        self._lock = threading.Lock()
        self.cleared_before = 0.0
        self.ids: set[str] = set()
        try:
            raw = cast(dict[str, Any], json.loads(self._path.read_text()))
            self.cleared_before = float(raw.get("clearedBefore", 0.0))
            self.ids = {str(i) for i in cast(list[object], raw.get("ids", []))}
        except (OSError, ValueError, TypeError, AttributeError):
            pass

    def hides(self, record: RunRecord) -> bool:
        return record.created_at < self.cleared_before or record.id in self.ids

    def clear(self, before: float) -> None:
        with self._lock:
            self.cleared_before, self.ids = before, set()
            self._save()

    def delete(self, ids: list[str]) -> None:
        with self._lock:
            self.ids.update(ids)
            self._save()

    def _save(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"clearedBefore": self.cleared_before, "ids": sorted(self.ids)})
        fd, tmp = tempfile.mkstemp(dir=self._path.parent, prefix=".hidden-")
        with os.fdopen(fd, "w") as f:
            f.write(body)
        os.replace(tmp, self._path)


class PromptLedger:
    def __init__(self, manager: RunManager, folder: Path) -> None:
        self._manager = manager
        self._store = manager.store
        self._lock = threading.Lock()
        self._finished: OrderedDict[str, PromptRun | None] = OrderedDict()
        self.hidden = Hidden(folder)

    def get(self, run_id: str) -> PromptRun | None:
        """A prompt's run as it is now (None: no run, or not a prompt's)."""
        with self._lock:
            if run_id in self._finished:
                return self._finished[run_id]
        view = self._store.view(run_id)
        if view is None:
            return None
        record, takes = view.record, view.takes
        if not record.status.finished:
            try:  # this server's live progress and takes, where it runs it
                record, takes = self._manager.get(run_id)
            except Exception:  # finished and forgotten meanwhile: the stored view stands
                pass
        meta = read_meta(record.graph)
        found = None if meta is None else PromptRun(meta, record, takes)
        if record.status.finished:
            self._keep(run_id, found)
        return found

    def _keep(self, run_id: str, found: PromptRun | None) -> None:
        with self._lock:
            self._finished[run_id] = found
            while len(self._finished) > KEPT:
                self._finished.popitem(last=False)

    def recent(self, limit: int = SCAN) -> list[PromptRun]:
        """Prompts' runs, newest first, among the store's `limit` most recent runs."""
        out: list[PromptRun] = []
        for summary in self._store.list_runs(limit):
            found = self.get(summary.id)
            if found is not None:
                out.append(found)
        return out

    def history(self) -> list[PromptRun]:
        """Finished prompts not hidden, newest first."""
        return [
            p for p in self.recent() if p.record.status.finished and not self.hidden.hides(p.record)
        ]

    def unfinished(self, status: RunStatus) -> list[PromptRun]:
        """Queued or running prompts, oldest first."""
        out: list[PromptRun] = []
        for record in self._store.unfinished_runs(status):
            meta = read_meta(record.graph)
            if meta is not None:
                out.append(PromptRun(meta, record, []))
        return out

    def queue_remaining(self) -> int:
        """ComfyUI's `queue_remaining`: every run waiting or running (ours and /v1's alike, as
        they share the workers)."""
        return self._store.queued_count() + len(self._store.unfinished_runs(RunStatus.RUNNING))

    def takes(self, run_id: str, ids: Iterable[str]) -> list[Take]:
        """The run's takes of `ids`: announced so far while it runs (the takes table has them
        only once it has ended), recorded after."""
        wanted = list(ids)
        view = self._store.view(run_id)
        known = {t.id: t for t in view.takes} if view is not None else {}
        missing = [i for i in wanted if i not in known]
        if missing:
            try:  # this server's own live takes, where its announcement is not stored yet
                known.update({t.id: t for t in self._manager.get(run_id)[1]})
            except Exception:
                pass
        return [known[i] for i in wanted if i in known]
