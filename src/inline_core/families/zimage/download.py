"""Explicit download of the Z-Image weights into the models folder (never called by a render).

    inline-core download [--family z-image] [--models DIR] [--dry-run] [--force] [TARGET ...]

Targets: `comfy` (the default: the three ComfyUI single files), `diffusers` (the full diffusers
folder), or one of `diffusion_model`, `vae`, `text_encoder`. Files land in `models/<category>/`
(staged in a hidden folder the catalog ignores, then moved in), with huggingface_hub's progress
bars. Files already present are skipped unless `--force`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

COMFY_REPO = "Comfy-Org/z_image_turbo"
DIFFUSERS_REPO = "Tongyi-MAI/Z-Image-Turbo"
STAGING = ".download"


@dataclass(frozen=True)
class Target:
    repo_id: str
    category: str  # the models/ subfolder
    file: str | None  # a file in the repo; None: the whole repo as a folder
    folder: str | None = None  # the folder name for a whole-repo download

    def destination(self, models: Path) -> Path:
        name = Path(self.file).name if self.file is not None else cast(str, self.folder)
        return models / self.category / name


TARGETS: dict[str, Target] = {
    "diffusion_model": Target(
        COMFY_REPO,
        "diffusion_models",
        "split_files/diffusion_models/z_image_turbo_bf16.safetensors",
    ),
    "vae": Target(COMFY_REPO, "vae", "split_files/vae/ae.safetensors"),
    "text_encoder": Target(
        COMFY_REPO, "text_encoders", "split_files/text_encoders/qwen_3_4b.safetensors"
    ),
    "diffusers": Target(DIFFUSERS_REPO, "diffusion_models", None, folder="Z-Image-Turbo"),
}
PRESETS: dict[str, tuple[str, ...]] = {"comfy": ("diffusion_model", "vae", "text_encoder")}


def expand(names: Sequence[str]) -> list[str]:
    """Target names with presets expanded, in order, without duplicates."""
    out: list[str] = []
    for name in names or ("comfy",):
        for item in PRESETS.get(name, (name,)):
            if item not in TARGETS:
                known = ", ".join([*PRESETS, *TARGETS])
                raise ValueError(f"unknown download target {item!r}; choose from {known}")
            if item not in out:
                out.append(item)
    return out


def plan(names: Sequence[str], models: Path, *, force: bool = False) -> list[tuple[str, Target]]:
    """The downloads to perform: targets whose destination is absent (or all, with `force`)."""
    return [
        (name, TARGETS[name])
        for name in expand(names)
        if force or not TARGETS[name].destination(models).exists()
    ]


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="inline-core download",
        epilog="Z-Image is the built-in family; --family NAME picks another one's download.",
        description="Download Z-Image Turbo weights into the models folder, with progress.",
    )
    parser.add_argument("targets", nargs="*", help="comfy (default), diffusers, or a component")
    parser.add_argument("--models", type=Path, default=Path("models"), help="the models folder")
    parser.add_argument("--force", action="store_true", help="download even if present")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    args = parser.parse_args(argv)
    models = cast(Path, args.models)
    try:
        todo = plan(cast(list[str], args.targets), models, force=bool(args.force))
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
        print(f"-> {fetch(target, models)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
