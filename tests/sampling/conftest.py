"""What the sampler tests share: the samplers a test starts, closed when it ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inline_core.sampling import StepLoopSampler


@pytest.fixture
def samplers() -> Iterator[list[StepLoopSampler]]:
    """A test appends each sampler it starts; all are closed after it."""
    made: list[StepLoopSampler] = []
    yield made
    for sampler in made:
        sampler.close()
