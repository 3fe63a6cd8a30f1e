"""The `sample` node's settings, and how ComfyUI's cfg maps onto Z-Image's guidance (torch-free).

ComfyUI guides with `uncond + cfg * (cond - uncond)`. Z-Image (diffusers' `ZImagePipeline`, and
our pipeline after it) guides with `cond + g * (cond - uncond)`, turning guidance on for `g > 0`.
Both are `uncond + (1 + g) * (cond - uncond)`, so `g = cfg - 1`: cfg 1 is no guidance in both
counts (ComfyUI then skips the uncond forward too), and the Z-Image node's guidance 3 is cfg 4.
cfg below 1 (pushing away from the prompt) is not offered: Z-Image's guidance never goes below 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


def guidance_for_cfg(cfg: float) -> float:
    """Z-Image's guidance scale for ComfyUI's `cfg`."""
    return max(cfg - 1.0, 0.0)


def cfg_for_guidance(guidance: float) -> float:
    """ComfyUI's `cfg` for Z-Image's guidance scale (the inverse of `guidance_for_cfg`)."""
    return guidance + 1.0


@dataclass(frozen=True)
class SampleSettings:
    steps: int
    cfg: float
    sampler: str
    scheduler: str
    seed: int
    denoise: float

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SampleSettings:
        return cls(
            steps=int(params["steps"]),
            cfg=float(params["cfg"]),
            sampler=str(params["sampler"]),
            scheduler=str(params["scheduler"]),
            seed=int(params["seed"]),
            denoise=float(params["denoise"]),
        )

    @property
    def guidance(self) -> float:
        return guidance_for_cfg(self.cfg)

    def to_info(self) -> dict[str, Any]:
        """What a decoded take records of how it was sampled (the seed actually used included)."""
        return asdict(self)
