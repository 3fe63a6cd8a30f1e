"""Where Z-Image's components run, as the device policy places them (torch-free at run time)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from inline_core.components.diffusers_zimage.placement import PlacementLike


class PolicyLike(Protocol):
    def placement(self, role: str, *, fp16_safe: bool = True) -> PlacementLike: ...


def zimage_placements(policy: PolicyLike) -> tuple[PlacementLike, PlacementLike, PlacementLike]:
    """(text encoder, denoiser, VAE). Z-Image's transformer and Qwen3 overflow float16, so they
    ask for bfloat16 or float32 instead."""
    return (
        policy.placement("text_encoder", fp16_safe=False),
        policy.placement("denoiser", fp16_safe=False),
        policy.placement("vae"),
    )
