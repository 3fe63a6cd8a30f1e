"""Samplers over one tensor whose slices along an axis walk one schedule at their own pace: a
diffusion-forcing video, each latent frame (or causal block of frames) at its own noise level.

Each group of slices that shares a level throughout gets its own `SigmaStepper`: its own history
(a multistep sampler's earlier outputs), its own draws of noise and its own place in the walk. A
forward feeds every slice at its own level; only the groups due at it advance, each on its slice
of the output, as diffusers' diffusion-forcing pipelines step one scheduler per frame. A group
that covers the whole tensor is the ordinary path: one stepper over the same tensor, the same
result bit for bit, its noise included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from inline_core.diffusion.sigma.stepper import SigmaStepper

Span = tuple[int, int]  # [start, end) along the axis


def shared_spans(stepping: Sequence[Sequence[bool]], levels: Sequence[Sequence[int]]) -> list[Span]:
    """The runs of neighbouring slices that step at the same iterations from the same levels
    (`stepping`, `levels`: one row per iteration, one entry per slice); a slice that never steps
    (a clean prefix) belongs to none."""
    columns = [
        tuple((row[i], level[i]) for row, level in zip(stepping, levels, strict=True))
        for i in range(len(stepping[0]) if stepping else 0)
    ]
    spans: list[Span] = []
    for i, column in enumerate(columns):
        if not any(due for due, _level in column):
            continue
        if spans and spans[-1][1] == i and columns[spans[-1][0]] == column:
            spans[-1] = (spans[-1][0], i + 1)
        else:
            spans.append((i, i + 1))
    return spans


class StaggeredSteppers:
    """One stepper per span of `axis` (`new_stepper()` makes each: one sampler, one schedule,
    and a noise source the spans share in the order they step, so a render is reproducible)."""

    def __init__(
        self, spans: Sequence[Span], new_stepper: Callable[[], SigmaStepper], axis: int
    ) -> None:
        self.spans = list(spans)
        self.axis = axis
        self.steppers = [new_stepper() for _ in self.spans]

    def due(self, stepping: Sequence[bool]) -> list[int]:
        """The spans that step where `stepping` (one entry per slice) says so."""
        return [g for g, (start, _end) in enumerate(self.spans) if stepping[start]]

    def advance(
        self,
        x: torch.Tensor,
        output: torch.Tensor,
        stepping: Sequence[bool],
        offset: int = 0,
        uncond: torch.Tensor | None = None,
    ) -> None:
        """Step the due spans of `x` in place: `output` (and a CFG++ sampler's `uncond`) is the
        model's over slices `offset` on; each span's slice of `x` becomes its next call's point
        (or its result after its last call)."""
        width = output.shape[self.axis]
        for g in self.due(stepping):
            start, end = self.spans[g]
            if start < offset or end > offset + width:
                raise RuntimeError(f"slices {start}..{end} step outside the forward's window")
            stepper = self.steppers[g]
            here = x.narrow(self.axis, start, end - start)
            seen = None if stepper.started else here.clone()  # its own copy: `x` changes under it
            out = output.narrow(self.axis, start - offset, end - start)
            un = None if uncond is None else uncond.narrow(self.axis, start - offset, end - start)
            here.copy_(stepper.advance(out, seen, un))
