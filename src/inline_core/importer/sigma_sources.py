"""What a ComfyUI sigmas node (`SamplerCustom`'s and `SamplerCustomAdvanced`'s `sigmas`) amounts
to on `sample`: its schedule, steps and denoise, and any other of `sample`'s params it sets (a
family's own shift `mu`, a window of the schedule). The core reads ComfyUI's own schedulers
(`custom_sampling.py`); a family's recipe adds its own sigmas nodes (`ComfyRecipe.sigma_sources`:
class -> `importer.mapper.SigmaSource`), so the core names no family."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Sigmas:
    scheduler: str
    steps: int
    denoise: float
    # `sample`'s other params the sigmas set (a shift `mu`, `start_step`/`end_step`).
    params: Mapping[str, Any] = field(default_factory=dict[str, Any])
