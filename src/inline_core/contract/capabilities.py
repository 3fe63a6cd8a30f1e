"""What a family supports, declared as data (torch-free) so the server, health and tests can read it
without loading anything."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# How requests share one transformer forward:
# - "lists": the transformer takes per-request lists, so any sizes, prompts and steps share one;
# - "shapes": it takes one batched tensor, so only requests whose latents share a shape do;
# - "none": one request per forward.
Batching = Literal["lists", "shapes", "none"]
ROLES = ("text_encoder", "denoiser", "vae")


@dataclass(frozen=True)
class Capabilities:
    batching: Batching = "none"
    # Split methods its transformer can be sharded with, and the engines that know how.
    split_methods: frozenset[str] = field(default_factory=frozenset[str])
    split_engines: frozenset[str] = field(default_factory=frozenset[str])
    # Its VAE decodes in chunks and declares the range of its values (spec 003).
    chunked_decode: bool = False
    # Its latents' formats in the step previews' table, `diffusion/preview/formats.py`, one per
    # VAE its models take (empty: no previews).
    preview_latents: frozenset[str] = field(default_factory=frozenset[str])
    adapters: frozenset[str] = field(default_factory=frozenset[str])
    # Roles whose activations overflow float16: they get bfloat16 (or float32) instead.
    fp16_overflow: frozenset[str] = field(default_factory=frozenset[str])
    # Roles trained in float16 (not bfloat16): they run in float16 on a GPU.
    fp16_preferred: frozenset[str] = field(default_factory=frozenset[str])
    # Whether the low-level vocabulary (load/*, encode/text, sample, vae/*) serves its files.
    primitives: bool = False
    # Step cache methods its pipelines adopt (`runtime/step_cache.py`: "dbcache").
    step_cache: frozenset[str] = field(default_factory=frozenset[str])

    def __post_init__(self) -> None:
        unknown = (self.fp16_overflow | self.fp16_preferred) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}; roles: {', '.join(ROLES)}")

    def to_json(self) -> dict[str, object]:
        return {
            "batching": self.batching,
            "splitMethods": sorted(self.split_methods),
            "splitEngines": sorted(self.split_engines),
            "chunkedDecode": self.chunked_decode,
            "previewLatents": sorted(self.preview_latents),
            "adapters": sorted(self.adapters),
            "primitives": self.primitives,
            "stepCache": sorted(self.step_cache),
        }
