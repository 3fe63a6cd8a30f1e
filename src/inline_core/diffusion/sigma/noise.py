"""Noise for ancestral and SDE samplers: each row draws from its own seeded generator, so a row's
picture does not depend on which rows share its forward. Drawn on the generator's device (the CPU
for the families here) and moved to the latents', as the starting noise is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch


class NoiseSource(Protocol):
    def __call__(self, like: torch.Tensor, /) -> torch.Tensor:
        """Standard normal noise shaped like `like` (rows along the first dimension)."""
        ...


class RowNoise:
    def __init__(self, generators: Sequence[torch.Generator]) -> None:
        self.generators = list(generators)

    def __call__(self, like: torch.Tensor, /) -> torch.Tensor:
        if like.shape[0] != len(self.generators):
            raise ValueError(f"{like.shape[0]} rows but {len(self.generators)} generators")
        rows = [
            torch.randn((1, *like.shape[1:]), generator=g, dtype=torch.float32, device=g.device)
            for g in self.generators
        ]
        return torch.cat(rows).to(like.device, like.dtype)


def row_generator(seed: int, batch_index: int = 0) -> torch.Generator:
    """A request's sampler noise: its own stream, apart from the one its starting noise came from
    (that one is seeded by `seed` alone and shared by a latent batch)."""
    return torch.Generator("cpu").manual_seed((seed * 1_000_003 + batch_index + 1) % 2**63)


class NoNoise:
    """Zeros: for a dry run that only follows a sampler's sigmas."""

    def __call__(self, like: torch.Tensor, /) -> torch.Tensor:
        return torch.zeros_like(like)
