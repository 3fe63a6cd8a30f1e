"""What a family can download: its targets (files of one hub repo, where they land, which parts of
its stack they provide) and presets of them, as one table per family (`Family.downloads`).

The table is data: the server's requirements route lists its targets as sources a client can post
to `/v1/downloads` as they are, and `inline-core download` (`downloads/cli.py`) runs the
same download manager over them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Layout = Literal["comfy", "diffusers"]
# A diffusers pipeline folder as a download: its model index and its parts' folders (not the
# repo's example images or its original-format weights).
DIFFUSERS_PIPELINE = (
    "model_index.json",
    "scheduler/*",
    "transformer/*",
    "vae/*",
    "text_encoder/*",
    "tokenizer/*",
)


@dataclass(frozen=True)
class Target:
    """Files of one hub repo and where they land under the models root.

    Without `folder`, each file lands by its own name in `models/<category>/` (ComfyUI's split
    files); with it, the files keep the repo's layout under `models/<category>/<folder>/` (a
    diffusers folder). `files` may hold fnmatch patterns (`vae/*`), matched against the repo's
    listing when the download is submitted."""

    repo_id: str
    category: str  # the models/ subfolder
    files: tuple[str, ...]
    folder: str | None = None
    roles: tuple[str, ...] = ()  # the stack parts it provides: "diffusion_model", "vae", ...
    layout: Layout = "comfy"
    revision: str | None = None  # None: the repo's default branch
    approx_gb: float | None = None  # its download size, roughly, for the command's help

    def destination(self, models: Path) -> Path:
        """Where it lands: the folder, or the (first) file by its own name."""
        name = self.folder if self.folder is not None else posixpath.basename(self.files[0])
        return models / self.category / name

    def request(self) -> dict[str, object]:
        """The `POST /v1/downloads` body that fetches it."""
        body: dict[str, object] = {
            "repo": self.repo_id,
            "files": list(self.files),
            "category": self.category,
        }
        if self.folder is not None:
            body["folder"] = self.folder
        if self.revision is not None:
            body["revision"] = self.revision
        return body


@dataclass(frozen=True)
class Downloads:
    """One family's download targets, and the presets behind `inline-core download`."""

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

    def listing(self, models: Path) -> str:
        """Every target and preset: what it fetches, where it lands and about how much, for the
        command's help (and for a user who would rather fetch the files by hand)."""
        lines = [f"what it downloads (into {models}/; --models DIR for another folder):"]
        for name, members in self.presets.items():
            sizes = [self.targets[m].approx_gb for m in members]
            about = f", about {_size(sum(s for s in sizes if s))}" if all(sizes) else ""
            default = " (the default)" if name == self.default else ""
            lines.append(f"  {name}{default}: {' + '.join(members)}{about}")
        for name, target in self.targets.items():
            about = f", about {_size(target.approx_gb)}" if target.approx_gb else ""
            default = " (the default)" if name == self.default else ""
            lines.append(f"  {name}{default}: {target.repo_id}{about}")
            lines.append(f"      {', '.join(target.files)}")
            lines.append(f"      -> {target.destination(models)}")
        return "\n".join(lines)

    def providing(self, role: str) -> list[tuple[str, Target]]:
        """The targets that provide one part of the stack, in table order."""
        return [(name, t) for name, t in self.targets.items() if role in t.roles]


def _size(gb: float) -> str:
    """A rough size for the listing: GB, or MB below a tenth of one (a tokenizer's files)."""
    return f"{gb:.1f} GB" if gb >= 0.1 else f"{gb * 1000:.0f} MB"
