"""A chunk's diffusion-forcing schedule: which model call each latent frame is at in each
iteration, the timestep it is fed there, which frames step, the frames that step together (one
sampler each), and the window the forward sees (torch).

The schedule is diffusers' own (`SkyReelsV2DiffusionForcingPipeline.generate_timestep_matrix`,
which reads nothing of the pipeline), over a frame's model calls: with `ar_step` 0 every frame of
a chunk steps together; above 0, each causal block starts `ar_step` iterations after the one
before it, so a chunk takes more iterations. A sampler that calls the model once a step (the
model's own UniPC, which diffusers runs) has one call a step; one that calls it twice (heun) has
twice the iterations, each block that many calls behind the one before. The prefix frames (the
overlap taken from the chunk before) sit at level 0 throughout and step in no sampler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch

from inline_core.diffusion.libs import module
from inline_core.diffusion.sigma.staggered import Span, shared_spans

NOT_STARTED = 999  # diffusers' timestep for a frame whose first call has not come


@dataclass(frozen=True)
class ChunkSchedule:
    matrix: torch.Tensor  # (iterations, frames) timesteps
    update: list[list[bool]]  # (iterations, frames): the frames that step
    intervals: list[tuple[int, int]]  # each iteration's window of frames [start, end)
    spans: list[Span]  # the runs of frames that step together: one sampler each

    @property
    def iterations(self) -> int:
        return len(self.intervals)

    def interval(self, iteration: int) -> tuple[int, int]:
        return self.intervals[iteration]


def chunk_schedule(
    frames: int, timesteps: torch.Tensor, ar_step: int, prefix: int, causal_block_size: int
) -> ChunkSchedule:
    """`timesteps`: what a frame is fed at each of its model calls, in order."""
    pipeline = module("diffusers").SkyReelsV2DiffusionForcingPipeline
    _levels, index, update, intervals = pipeline.generate_timestep_matrix(
        cast(Any, None), frames, timesteps, frames, ar_step, prefix, causal_block_size
    )
    # diffusers' table over a frame's call index (0: not started; past the last call: done, at
    # 0), in the calls' own dtype: the model's own UniPC's integer timesteps, a named sampler's
    # sigma x 1000.
    table = torch.cat([timesteps.new_tensor([NOT_STARTED]), timesteps, timesteps.new_tensor([0])])
    matrix = table[cast(torch.Tensor, index).to(table.device)]
    mask = cast(list[list[bool]], update.tolist())
    windows = [(int(s), int(e)) for s, e in intervals]
    return ChunkSchedule(matrix, mask, windows, shared_spans(mask, index.tolist()))
