"""`inline-core download`: a family's targets fetched by the same `DownloadManager` the server's
`/v1/downloads` runs, in this process, with a progress bar on stderr. An interrupted download
(Ctrl-C, a crash) is resumed by running the command again: its record and partial files are in
the models folder."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, cast

from inline_core.downloads.manager import DownloadManager
from inline_core.errors import InlineError

if TYPE_CHECKING:
    from inline_core.downloads.targets import Downloads, Target

MB = 1024 * 1024


class DownloadCommand(Protocol):
    def __call__(self, argv: Sequence[str] | None = None) -> int: ...


def download_command(table: Downloads) -> DownloadCommand:
    """A family's `inline-core download`: this command over its table."""

    def main(argv: Sequence[str] | None = None) -> int:
        return run_cli(table, argv)

    return main


def run_cli(table: Downloads, argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="inline-core download",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{table.listing(Path('models'))}\n\n"
        "--family NAME picks another family's download (the built-in one by default).\n"
        "HF_ENDPOINT names another hub; HF_TOKEN (or `hf auth login`) opens gated repos.",
        description=f"Download {table.title} weights into the models folder, with progress.",
    )
    choices = ", ".join([*table.presets, *table.targets])
    parser.add_argument("targets", nargs="*", help=f"{table.default} (default), or {choices}")
    parser.add_argument("--models", type=Path, default=Path("models"), help="the models folder")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    args = parser.parse_args(argv)
    models = cast(Path, args.models)
    try:
        todo = table.plan(cast(list[str], args.targets), models)
    except ValueError as exc:
        parser.error(str(exc))
    listing = [
        {"target": n, "repo": t.repo_id, "files": list(t.files), "to": str(t.destination(models))}
        for n, t in todo
    ]
    print(json.dumps({"models": str(models), "downloads": listing}, indent=2), flush=True)
    if args.dry_run or not todo:
        return 0
    manager = DownloadManager(models, endpoint=os.environ.get("HF_ENDPOINT") or None, max_active=1)
    bar = ProgressBar(sys.stderr)
    manager.add_listener(bar.on_event)
    manager.start(resume=False)  # only what was asked for; an earlier try of it is resumed below
    try:
        for name, target in todo:
            state = manager.wait(_begin(manager, target))
            bar.end()
            if state["status"] != "done":
                error = state["error"] or {"message": state["status"]}
                print(f"inline-core download: {name}: {error['message']}", file=sys.stderr)
                print(_by_hand(target, models), file=sys.stderr)
                return 1
            print(f"-> {', '.join(state['destinations'])}", flush=True)
    except InlineError as exc:
        bar.end()
        print(f"inline-core download: {exc.message}", file=sys.stderr)
        for _name, target in todo:
            print(_by_hand(target, models), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        manager.close()
        bar.end()
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        manager.close()
    return 0


def _by_hand(target: Target, models: Path) -> str:
    """Where to put a target's files when this machine cannot download them itself."""
    where = target.destination(models) if target.folder else target.destination(models).parent
    return f"  or fetch {', '.join(target.files)} from {target.repo_id} yourself into {where}/"


def _begin(manager: DownloadManager, target: Target) -> str:
    """The download of `target`: an unfinished earlier one resumed, or a new one."""
    where = {target.destination(manager.models)}
    for record in manager.unfinished():
        if record.repo == target.repo_id and set(record.destinations(manager.models)) == where:
            manager.resume(record.id)
            return record.id
    state = manager.submit(
        target.repo_id,
        target.files,
        target.category,
        revision=target.revision,
        folder=target.folder,
    )
    return str(state["downloadId"])


class ProgressBar:
    """One line per download, redrawn in place on a terminal (every tenth otherwise)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._shown: int = -1
        self._open = False

    def on_event(self, _download_id: str, event: dict[str, Any]) -> None:
        if event["type"] != "progress":
            return
        done, total = int(event["bytesDone"]), max(1, int(event["bytesTotal"]))
        tenth = done * 10 // total
        if not self.tty and tenth == self._shown:
            return
        self._shown = tenth
        eta = event["etaS"]
        line = (
            f"{event['file'][-40:]:<40} {100 * done / total:5.1f}%  {done / MB:,.0f}/"
            f"{total / MB:,.0f} MB  {float(event['rate']) / MB:6.1f} MB/s"
            f"  ETA {_clock(eta) if eta is not None else '--:--'}"
        )
        self.out.write(("\r" + line) if self.tty else line + "\n")
        self.out.flush()
        self._open = self.tty

    def end(self) -> None:
        if self._open:
            self.out.write("\n")
            self.out.flush()
            self._open = False
        self._shown = -1


def _clock(seconds: float) -> str:
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"
