"""The seam between the graph and the accelerator: `SampleJob` -> `BatchedSampler`. Torch-free."""

from inline_core.sampling.job import BatchedSampler, SampleJob
from inline_core.sampling.limits import BatchLimits, default_limits, resolve_limits
from inline_core.sampling.loop import StepLoopSampler

__all__ = [
    "BatchLimits",
    "BatchedSampler",
    "SampleJob",
    "StepLoopSampler",
    "default_limits",
    "resolve_limits",
]
