"""A chunk's diffusion-forcing schedule: which level each latent frame is at in each iteration,
which frames step, and the window the forward sees (torch).

The schedule is diffusers' own (`SkyReelsV2DiffusionForcingPipeline.generate_timestep_matrix`,
which reads nothing of the pipeline): with `ar_step` 0 every frame of a chunk steps together; above
0, each causal block starts `ar_step` iterations after the one before it, so a chunk takes more
iterations. The prefix frames (the overlap taken from the chunk before) sit at level 0 throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch

from inline_core.diffusion.libs import module


@dataclass(frozen=True)
class ChunkSchedule:
    matrix: torch.Tensor  # (iterations, frames) timesteps
    update: list[list[bool]]  # (iterations, frames): the frames that step
    intervals: list[tuple[int, int]]  # each iteration's window of frames [start, end)

    @property
    def iterations(self) -> int:
        return len(self.intervals)

    def interval(self, iteration: int) -> tuple[int, int]:
        return self.intervals[iteration]


def chunk_schedule(
    frames: int, timesteps: torch.Tensor, ar_step: int, prefix: int, causal_block_size: int
) -> ChunkSchedule:
    pipeline = module("diffusers").SkyReelsV2DiffusionForcingPipeline
    matrix, _index, update, intervals = pipeline.generate_timestep_matrix(
        cast(Any, None), frames, timesteps, frames, ar_step, prefix, causal_block_size
    )
    mask = cast(list[list[bool]], update.tolist())
    spans = [(int(s), int(e)) for s, e in intervals]
    return ChunkSchedule(cast(torch.Tensor, matrix), mask, spans)
