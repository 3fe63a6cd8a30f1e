"""The torch side of a family, as the shared layer calls it (the protocol is torch-free).

A family's builder loads each part of its stack from a `Source` on a placement, and assembles
loaded parts into the objects the server drives: the node's whole step pipeline (prompt to image),
the denoiser alone (the `sample` primitive: encoded prompts in, latents out), a text encoder and a
VAE component. The shared layer (`engine/stacks.py`) keeps loaded parts resident and hands the
builder the ones it asks for; the worker group's ranks call the same builder, without residency.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from inline_core.components.interfaces import TextEncoder
from inline_core.components.step import StepPipeline
from inline_core.device.policy import Placement
from inline_core.models.source import Source

ADAPTER_CACHE = "adapter_cache"
FUSED_COPIES = "fused_copies"


# The role of a part that denoises (a two-expert model has two): the step cache and the
# cancel between blocks attach to these.
DENOISER = "denoiser"
# The role of a part that encodes and decodes pixels (its decoder's blocks may run compiled).
VAE = "vae"


@dataclass
class Parts:
    """Loaded parts of one stack, by the family's part names, with where each role runs.

    `swap` is the stack's shared offload swap (one per process); `model_key` names the weights,
    device and dtype of the forward (requests with equal keys may share one). `extra` carries
    what the resident stacks add: under `ADAPTER_CACHE` the cache adapter weights load through
    (absent on a rank: the denoiser keeps its own), under `FUSED_COPIES` where fused LoRA copies
    are counted (absent on a rank: its forwards apply LoRAs per row)."""

    values: Mapping[str, Any]
    placements: Mapping[str, Placement]
    swap: Any
    model_key: Hashable = ""
    extra: dict[str, Any] = field(default_factory=dict[str, Any])

    def __getitem__(self, part: str) -> Any:
        return self.values[part]

    @property
    def serial_phases(self) -> bool:
        """Whether encode and decode run between steps, not beside them: with CPU offload they
        swap modules on the device the steps use."""
        return any(p.offload for p in self.placements.values())


def placed_as(role: str, roles: Mapping[str, str], parts: Parts) -> dict[str, Any]:
    """The loaded parts placed as `role`, by part name (a two-expert model's pair of denoisers,
    the image and audio VAEs)."""
    return {
        part: parts[part]
        for part, placed in roles.items()
        if placed == role and part in parts.values
    }


class FamilyBuilder(Protocol):
    # part -> the device policy role it is placed as ("transformer": "denoiser", ...); parts with
    # no role (a tokenizer, a scheduler config) are not placed and cost no memory.
    roles: Mapping[str, str]
    # Optional `shared_parts`: part -> the shared format it loads in (e.g. "text_encoder":
    # "qwen3"): the same files on the same placement load once for every family that shares it
    # (`engine/stacks.py`); the family's own objects over it are still its own.

    def load(self, part: str, source: Source | None, placement: Placement | None) -> Any:
        """Load one part (`source` None: the family's built-in default, e.g. its scheduler)."""
        ...

    def pipeline(self, parts: Parts) -> StepPipeline:
        """The node's whole stack as a step pipeline (spec 003)."""
        ...

    def denoiser(self, parts: Parts) -> StepPipeline:
        """The transformer and its schedule alone: requests come with their prompts encoded
        (`positive`, `negative`) and leave as latents. Its `request()` takes the `sample`
        primitive's arguments (see `families/nodes/ops.py`)."""
        ...

    def text_encoder(self, parts: Parts) -> TextEncoder:
        """The prompt encoder over the `text_encoder` and `tokenizer` parts."""
        ...

    def vae(self, parts: Parts) -> Any:
        """The VAE component over the `vae` part (`components.interfaces.VAE`)."""
        ...


@runtime_checkable
class CachesBlocks(Protocol):
    """A builder whose pipelines adopt the step cache (`diffusion/stepcache/`) on the blocks of
    each part it places as a denoiser (its `transformer`; a two-expert model's both experts),
    laid out as `step_cache_layout` says (a `BlockLayout`)."""

    roles: Mapping[str, str]
    step_cache_layout: Any
