"""All-in-one checkpoints (torch-free): one file holding a diffusion model, its VAE and its text
encoders, each under its own key prefix, as ComfyUI saves them (`CheckpointSave`) and as the
files in `models/checkpoints/` come.

A checkpoint is read as views: each part's tensors under its prefix, the prefix cut, so every
part loader reads its view exactly as it reads a split file (header first, then mapped). Nothing
here reads past the header.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from inline_core.diffusion.files.header import HEADERS, HeaderError

DIFFUSION_MODEL = "model.diffusion_model."
VAES = ("first_stage_model.", "vae.")
# ComfyUI's own saves: `text_encoders.<name>.`; older (SD 1.x): `cond_stage_model.`; SDXL and
# later Stability files: `conditioner.embedders.<n>.`.
_TEXT_ENCODER = re.compile(
    r"^(text_encoders\.[^.]+\.|cond_stage_model\.|conditioner\.embedders\.\d+\.)"
)


@dataclass(frozen=True)
class View:
    """One part of a checkpoint: what it is ("diffusion_model", "vae", "text_encoder"), its
    name (a text encoder's, e.g. "qwen3_4b"; else the part), and its key prefix."""

    part: str
    name: str
    prefix: str

    def to_json(self) -> dict[str, str]:
        return {"part": self.part, "name": self.name, "prefix": self.prefix}


def views_of(keys: Iterable[str]) -> tuple[View, ...]:
    """The parts a checkpoint's keys hold, in the order diffusion model, VAE, text encoders."""
    found: dict[str, View] = {}
    for key in keys:
        if key.startswith(DIFFUSION_MODEL):
            found.setdefault(
                DIFFUSION_MODEL, View("diffusion_model", "diffusion_model", DIFFUSION_MODEL)
            )
            continue
        vae = next((p for p in VAES if key.startswith(p)), None)
        if vae is not None:
            found.setdefault(vae, View("vae", "vae", vae))
            continue
        match = _TEXT_ENCODER.match(key)
        if match is not None:
            prefix = match.group(1)
            name = prefix.rstrip(".").rpartition(".")[2]
            found.setdefault(prefix, View("text_encoder", name, prefix))
    order = {"diffusion_model": 0, "vae": 1, "text_encoder": 2}
    return tuple(sorted(found.values(), key=lambda v: (order[v.part], v.prefix)))


def checkpoint_views(path: Path) -> tuple[View, ...] | None:
    """The views of a checkpoint file; None when its header cannot be read. A file with no known
    prefix has none (a split file put in `checkpoints/` by mistake)."""
    try:
        return views_of(HEADERS.get(path))
    except (HeaderError, OSError):
        return None


def checkpoint_contents(path: Path) -> list[dict[str, str]] | None:
    """What the catalog lists of a checkpoint: its views; None when unreadable."""
    views = checkpoint_views(path)
    return None if views is None else [v.to_json() for v in views]


def view_of(views: Iterable[View], part: str, names: tuple[str, ...] = ()) -> View | None:
    """The first view of `part` (of those `names` name, when given)."""
    return next((v for v in views if v.part == part and (not names or v.name in names)), None)


def holds_prefix(path: Path, prefix: str) -> bool:
    """Whether a checkpoint holds keys under `prefix` (False when its header is unreadable)."""
    try:
        return any(k.startswith(prefix) for k in HEADERS.get(path))
    except (HeaderError, OSError):
        return False


def model_keys(path: Path) -> list[str] | None:
    """The diffusion model's keys of a checkpoint (its prefix cut), or a split file's own; None
    when the header cannot be read."""
    try:
        keys = HEADERS.get(path)
    except (HeaderError, OSError):
        return None
    inside = [k.removeprefix(DIFFUSION_MODEL) for k in keys if k.startswith(DIFFUSION_MODEL)]
    return inside or list(keys)


def key_outline(keys: Iterable[str], shown: int = 6) -> str:
    """What a model's keys look like, for messages: their distinct top-level names."""
    heads = sorted({k.split(".", 1)[0] for k in keys})
    more = f", ... ({len(heads) - shown} more)" if len(heads) > shown else ""
    return ", ".join(f"{h}.*" for h in heads[:shown]) + more
