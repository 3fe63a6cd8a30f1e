"""SDXL's refiner, as files and as a switch (torch-free; runs at submit).

A refiner checkpoint (`sd_xl_refiner_1.0.safetensors` and its kin) is told by its keys: its one
text encoder is OpenCLIP-G at `conditioner.embedders.0.` (a base has CLIP-L there) and its UNet
is SDXL's, its size embedding taking an aesthetic score. Picked as the node's `refiner`, it adds
two parts to the stack: its UNet (`refiner`) and its encoder (`refiner_text_encoder`); its VAE
decodes (unless a `vae` is picked), as diffusers' refiner pipeline and ComfyUI's refiner
template decode with the refiner's.

The switch is diffusers' `denoising_end` / `denoising_start`: the base runs the steps whose
training timestep is at or above `round((1 - switch) * T)`, the refiner the rest (the low-noise
timesteps it was trained on). On a schedule even in timesteps ("normal"), `switch = k / steps`
is step k, where ComfyUI's two KSamplerAdvanced stages split.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from inline_core.contract.sources import Missing
from inline_core.diffusion.files.checkpoint import DIFFUSION_MODEL, VAES
from inline_core.diffusion.files.header import HEADERS, HeaderError
from inline_core.errors import NotFound
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source

REFINER, REFINER_TEXT_ENCODER = "refiner", "refiner_text_encoder"  # the stack's parts
REFINER_VIEW = "conditioner.embedders.0."  # a refiner's one text encoder's view
REFINER_ENCODER = REFINER_VIEW + "model."  # OpenCLIP-G's naming under it (a base: CLIP-L's)
AESTHETIC_NUMBERS = 5  # a refiner's size embedding: height, width, crop top, crop left, score
AESTHETIC_SCORE, NEGATIVE_AESTHETIC_SCORE = 6.0, 2.5  # diffusers' and ComfyUI's defaults


def is_refiner(path: Path | None) -> bool:
    """Whether a checkpoint file is an SDXL refiner's, by its keys (header only)."""
    if path is None or not path.is_file():
        return False
    try:
        keys = HEADERS.get(path)
    except (HeaderError, OSError):
        return False
    return any(k.startswith(REFINER_ENCODER) for k in keys)


def with_refiner(
    parts: Mapping[str, Source | None],
    name: str,
    catalog: Catalog,
    vae_picked: bool,
    missing: list[Missing],
) -> dict[str, Source | None]:
    """The stack's parts with the refiner checkpoint `name`'s UNet and encoder (and its VAE,
    unless one is picked); `missing` gets why it cannot be one."""
    out = dict(parts)
    try:
        entry = catalog.entry("checkpoints", name)
    except NotFound:
        missing.append(Missing("refiner", f"{name!r} is not in {catalog.root / 'checkpoints'}"))
        out[REFINER] = None
        return out
    if not is_refiner(entry.path):
        missing.append(
            Missing(
                "refiner",
                f"checkpoints/{name} is not an SDXL refiner checkpoint: a refiner's one text "
                f"encoder is OpenCLIP-G at {REFINER_VIEW} (a base checkpoint has CLIP-L there "
                "and OpenCLIP-G beside it); pick a refiner (sd_xl_refiner_1.0.safetensors) as "
                "the refiner and the base as the model",
            )
        )
        out[REFINER] = None
        return out
    out[REFINER] = Source(entry.path, view=DIFFUSION_MODEL)
    out[REFINER_TEXT_ENCODER] = Source(entry.path, view=REFINER_VIEW)
    if not vae_picked:
        keys = HEADERS.get(entry.path)
        vae = next((p for p in VAES if any(k.startswith(p) for k in keys)), None)
        if vae is not None:
            out["vae"] = Source(entry.path, view=vae)
    return out


def switch_step(timesteps: Sequence[float], switch: float, train_steps: int = 1000) -> int:
    """How many of a schedule's steps (their training timesteps, falling) the base runs:
    those at or above diffusers' cutoff `round(T - switch * T)`."""
    cutoff = round(train_steps - switch * train_steps)
    return sum(1 for t in timesteps if t >= cutoff)


def switch_refusal(value: float) -> str | None:
    """Why a `refiner_switch` cannot be (None: it can)."""
    if 0.0 < value < 1.0:
        return None
    return (
        f"refiner_switch {value:g} must be between 0 and 1 (exclusive): the share of the "
        "denoising the base runs before the refiner takes over (diffusers' denoising_end; "
        "0.8 hands the refiner the last fifth, its trained low-noise timesteps)"
    )
