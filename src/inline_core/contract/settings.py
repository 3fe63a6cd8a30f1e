"""The `sample` node's settings, as ComfyUI counts them (torch-free).

`cfg` is ComfyUI's guidance count (`uncond + cfg * (cond - uncond)`, 1 is no guidance); each family
maps it onto its own guidance scale (`Family.guidance_for_cfg`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from inline_core.diffusion.sigma.window import ALL_STEPS


@dataclass(frozen=True)
class SampleSettings:
    steps: int
    cfg: float
    sampler: str
    scheduler: str
    seed: int
    denoise: float
    # ComfyUI's KSamplerAdvanced window: steps start_step..end_step of the schedule, noise added
    # to the start latent or not, the latent handed on with its leftover noise or not.
    start_step: int = 0
    end_step: int = ALL_STEPS
    add_noise: bool = True
    leftover_noise: bool = False
    # The model's flow shift for this render (ComfyUI's ModelSamplingSD3/AuraFlow `shift`, or
    # ModelSamplingFlux's `mu`); None: the model's own.
    shift: float | None = None
    mu: float | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SampleSettings:
        return cls(
            steps=int(params["steps"]),
            cfg=float(params["cfg"]),
            sampler=str(params["sampler"]),
            scheduler=str(params["scheduler"]),
            seed=int(params["seed"]),
            denoise=float(params["denoise"]),
            start_step=int(params.get("start_step", 0)),
            end_step=int(params.get("end_step", ALL_STEPS)),
            add_noise=bool(params.get("add_noise", True)),
            leftover_noise=bool(params.get("leftover_noise", False)),
            shift=_number(params.get("shift")),
            mu=_number(params.get("mu")),
        )

    @property
    def windowed(self) -> bool:
        """Whether it runs a KSamplerAdvanced window rather than the whole schedule from noise."""
        return (self.start_step, self.end_step, self.add_noise, self.leftover_noise) != (
            0,
            ALL_STEPS,
            True,
            False,
        )

    def window_fields(self) -> dict[str, Any]:
        """The window as a family's denoiser request takes it (nothing for a whole render)."""
        if not self.windowed:
            return {}
        return {
            "start_step": self.start_step,
            "end_step": self.end_step,
            "add_noise": self.add_noise,
            "leftover_noise": self.leftover_noise,
        }

    def shift_fields(self) -> dict[str, float]:
        """The shift as a flow family's request takes it (nothing for the model's own)."""
        return {k: v for k, v in (("shift", self.shift), ("mu", self.mu)) if v is not None}

    @property
    def guided(self) -> bool:
        """Whether the render guides against a negative (ComfyUI's count: above 1)."""
        return self.cfg > 1.0

    def to_info(self) -> dict[str, Any]:
        """What a decoded take records of how it was sampled (the seed actually used included;
        the window only where it is one)."""
        info = asdict(self)
        if not self.windowed:
            for name in ("start_step", "end_step", "add_noise", "leftover_noise"):
                del info[name]
        for name in ("shift", "mu"):
            if info[name] is None:
                del info[name]
        return info


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
