"""What a ComfyUI sigmas node (`SamplerCustom`'s and `SamplerCustomAdvanced`'s `sigmas`) amounts
to on `sample`: its schedule, steps and denoise, and any other of `sample`'s params it sets (a
family's own shift `mu`, a window of the schedule). The core reads ComfyUI's own schedulers
(`custom_sampling.py`); a family's recipe adds its own sigmas nodes (`ComfyRecipe.sigma_sources`),
so the core names no family."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from inline_core.importer.values import Value
from inline_core.importer.workflow import ComfyNode

if TYPE_CHECKING:  # the mapper holds the table of sources: a type only, no import circle
    from inline_core.importer.mapper import Mapper


@dataclass(frozen=True)
class Sigmas:
    scheduler: str
    steps: int
    denoise: float
    # `sample`'s other params the sigmas set (a shift `mu`, `start_step`/`end_step`).
    params: Mapping[str, Any] = field(default_factory=dict[str, Any])


# A sigmas class's reader: the mapper, the sigmas node, the model value the sampler samples.
SigmaSource = Callable[["Mapper", ComfyNode, Value | None], Sigmas]
