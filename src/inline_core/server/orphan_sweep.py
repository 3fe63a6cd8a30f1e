"""Start-up sweep of take files no run will ever reference.

A take file is written before its run's terminal state and takes rows are committed, so a process
killed in between, or a run that then failed its retries (INLINE_MAX_RETRIES) and was ended by
recovery, leaves files no stored take points at. They are removed here, once recovery has decided
which runs may run again and before any worker or submission can write a new take. Files of runs
that may run again are left alone: take ids are deterministic, so the re-run rewrites them in
place. Names that are not take files are never touched, nor are links or folders.

With a shared store the takes folder is shared too, and other servers write into it while this one
starts: there every unfinished run's files are kept, and so is any file younger than `min_age_s`
(a run submitted a moment ago may be writing it).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from inline_core.runtime.file_store import take_id_for
from inline_core.server.run_state import RunRecord
from inline_core.server.stores.run_store import RunStore
from inline_core.sizes import human_size

log = logging.getLogger(__name__)

# `take_id_for` ids with the file's suffix (".png", ...).
TAKE_FILE = re.compile(r"(tk_[0-9a-f]{24})(\.[A-Za-z0-9]{1,16})?")
# Takes one node may write per run that a re-run would rewrite. Above the largest batch any node
# writes (16); a file past it would be rewritten by its re-run anyway, the sweep runs before it.
TAKES_PER_NODE = 64
# Removed files are logged one by one up to this many, then as a count.
LOGGED_NAMES = 20


@dataclass(frozen=True)
class SweepReport:
    removed: int = 0
    freed_bytes: int = 0
    kept_for_rerun: int = 0


def rerun_take_ids(runs: Iterable[RunRecord]) -> set[str]:
    """Every take id the runs that will run again may write."""
    ids: set[str] = set()
    for record in runs:
        node_ids = set(record.nodes)
        nodes = cast(list[object], record.graph.get("nodes", []))
        for node in nodes:
            if isinstance(node, dict):
                node_id = cast(dict[str, object], node).get("id")
                if isinstance(node_id, str):
                    node_ids.add(node_id)
        for node_id in node_ids:
            ids.update(take_id_for(record.id, node_id, i) for i in range(TAKES_PER_NODE))
    return ids


def sweep_orphan_takes(
    takes_root: Path, store: RunStore, rerun: list[RunRecord], min_age_s: float = 0.0
) -> SweepReport:
    """Remove the take files under `takes_root` that no stored take references, except those of
    the `rerun` runs and those modified in the last `min_age_s`. Call before this server can
    write a take (read `rerun` before the recorded takes: a run that ends in between is then in
    one of the two)."""
    if not takes_root.is_dir():
        return SweepReport()
    recorded = store.take_ids()
    protected: set[str] | None = None  # computed only if some file is unreferenced
    removed = freed = kept = 0
    now = time.time()
    for entry in os.scandir(takes_root):
        match = TAKE_FILE.fullmatch(entry.name)
        if match is None or match.group(1) in recorded:
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        if protected is None:
            protected = rerun_take_ids(rerun)
        try:
            stat = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if match.group(1) in protected or now - stat.st_mtime < min_age_s:
            kept += 1
            continue
        try:
            size = stat.st_size
            os.unlink(entry.path)
        except OSError as exc:
            log.warning("could not remove orphan take file %s: %s", entry.path, exc)
            continue
        removed += 1
        freed += size
        if removed <= LOGGED_NAMES:
            log.info("removed orphan take file %s (%s, unreferenced)", entry.name, human_size(size))
    if removed:
        log.info(
            "removed %d orphan take files (%s) left by runs that ended without them",
            removed,
            human_size(freed),
        )
    return SweepReport(removed=removed, freed_bytes=freed, kept_for_rerun=kept)
