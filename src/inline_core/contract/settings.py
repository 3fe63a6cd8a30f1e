"""The `sample` node's settings, as ComfyUI counts them (torch-free).

`cfg` is ComfyUI's guidance count (`uncond + cfg * (cond - uncond)`, 1 is no guidance); each family
maps it onto its own guidance scale (`Family.guidance_for_cfg`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


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
    def guided(self) -> bool:
        """Whether the render guides against a negative (ComfyUI's count: above 1)."""
        return self.cfg > 1.0

    def to_info(self) -> dict[str, Any]:
        """What a decoded take records of how it was sampled (the seed actually used included)."""
        return asdict(self)
