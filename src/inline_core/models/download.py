"""Explicit downloads of a family's weights into the models folder (never called by a render).

A family names its targets (a file in a hub repository, or a whole repository as a folder) and
presets of them; this module plans what is missing and fetches it with huggingface_hub's progress
bars. A single file is staged in a hidden folder the catalog ignores, then moved into place, so a
half-downloaded file is never seen as a model.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

STAGING = ".download"


@dataclass(frozen=True)
class Target:
    repo_id: str
    category: str  # the models/ subfolder
    file: str | None  # a file in the repo; None: the whole repo as a folder
    folder: str | None = None  # the folder name for a whole-repo download
    size: str | None = None  # about how much it downloads, for the help ("12.3 GB")

    def destination(self, models: Path) -> Path:
        name = Path(self.file).name if self.file is not None else cast(str, self.folder)
        return models / self.category / name


@dataclass(frozen=True)
class Downloads:
    """One family's download targets, and the command line behind `inline-core download`."""

    title: str  # what is downloaded, for the command's help
    targets: Mapping[str, Target]
    presets: Mapping[str, tuple[str, ...]]  # a name standing for several targets
    default: str  # the preset (or target) downloaded when none is named

    def expand(self, names: Sequence[str]) -> list[str]:
        """Target names with presets expanded, in order, without duplicates."""
        out: list[str] = []
        for name in names or (self.default,):
            for item in self.presets.get(name, (name,)):
                if item not in self.targets:
                    known = ", ".join([*self.presets, *self.targets])
                    raise ValueError(f"unknown download target {item!r}; choose from {known}")
                if item not in out:
                    out.append(item)
        return out

    def plan(
        self, names: Sequence[str], models: Path, *, force: bool = False
    ) -> list[tuple[str, Target]]:
        """The downloads to perform: targets whose destination is absent (or all, with `force`)."""
        return [
            (name, self.targets[name])
            for name in self.expand(names)
            if force or not self.targets[name].destination(models).exists()
        ]

    def describe(self) -> str:
        """The targets for the help: where each comes from, where it lands, its size."""
        lines = [f"{self.title} downloads (into MODELS/<folder>/):"]
        for name, target in self.targets.items():
            what = target.file or "the whole repository"
            size = f", {target.size}" if target.size else ""
            lines.append(f"  {name:<16} {target.repo_id}: {what} -> {target.category}/{size}")
        for name, items in self.presets.items():
            default = " (the default)" if name == self.default else ""
            lines.append(f"  {name:<16} {' + '.join(items)}{default}")
        lines.append(
            "--family NAME picks another family's downloads (the built-in one by default)."
        )
        return "\n".join(lines)

    def main(self, argv: Sequence[str] | None = None) -> int:
        parser = argparse.ArgumentParser(
            prog="inline-core download",
            epilog=self.describe(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            description=f"Download {self.title} weights into the models folder, with progress.",
        )
        choices = ", ".join([*self.presets, *self.targets])
        parser.add_argument("targets", nargs="*", help=f"{self.default} (default), or {choices}")
        parser.add_argument(
            "--models", type=Path, default=Path("models"), help="the models folder (./models)"
        )
        parser.add_argument("--force", action="store_true", help="download even if present")
        parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
        args = parser.parse_args(argv)
        models = cast(Path, args.models)
        try:
            todo = self.plan(cast(list[str], args.targets), models, force=bool(args.force))
        except ValueError as exc:
            parser.error(str(exc))
        listing = [
            {"target": name, "repo": t.repo_id, "file": t.file, "to": str(t.destination(models))}
            for name, t in todo
        ]
        print(json.dumps({"models": str(models), "downloads": listing}, indent=2))
        if args.dry_run or not todo:
            return 0
        for _name, target in todo:
            try:
                done = fetch(target, models)
            except Exception as exc:  # no network, no hub, a repo moved: one line, not a trace
                print(unreachable(target, models, exc), file=sys.stderr)
                return 1
            print(f"-> {done}", flush=True)
        return 0


def unreachable(target: Target, models: Path, exc: BaseException) -> str:
    """What a failed download says: why, in a line, and where to put the file instead."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    what = f"{target.repo_id}/{target.file}" if target.file else target.repo_id
    return (
        f"inline-core download: cannot fetch {what} from the Hugging Face hub "
        f"({type(exc).__name__}: {reason}). Without a network, copy the "
        f"{'file' if target.file else 'folder'} from elsewhere to {target.destination(models)}"
    )


def fetch(target: Target, models: Path) -> Path:
    """Download one target into place (needs the network and huggingface_hub)."""
    hub = cast(Any, importlib.import_module("huggingface_hub"))
    destination = target.destination(models)
    destination.parent.mkdir(parents=True, exist_ok=True)
    if target.file is None:
        hub.snapshot_download(target.repo_id, local_dir=str(destination))
        return destination
    staging = destination.parent / STAGING
    hub.snapshot_download(target.repo_id, allow_patterns=[target.file], local_dir=str(staging))
    (staging / target.file).replace(destination)
    shutil.rmtree(staging, ignore_errors=True)
    return destination
