"""Fixtures of the worker-group tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.worker_groups import shared_sampler

if TYPE_CHECKING:
    from inline_core.families.zimage.kit import KitPaths
    from inline_core.parallel.sampler import ParallelSampler


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory) -> KitPaths:
    """The tiny random-weight Z-Image stack, diffusers layout, in a models folder (built once)."""
    from inline_core.families.zimage.kit import build_kit

    return build_kit(tmp_path_factory.mktemp("kit") / "models", "tiny", layouts=("diffusers",))


@pytest.fixture(scope="module")
def cache_dit_group(request: pytest.FixtureRequest) -> ParallelSampler:
    """The run's one group of two gloo ranks splitting the tiny kit with cache-dit, for the
    modules marked `worker_group(shared="cache-dit")`."""
    from inline_core.parallel.runner import DEFAULT_RUNNER
    from inline_core.parallel.sampler import ParallelSampler
    from tests.parallel.parallel_support import group_config

    return shared_sampler(
        request, "cache-dit", lambda: ParallelSampler(group_config(DEFAULT_RUNNER), retries=1)
    )


@pytest.fixture(scope="module")
def xfuser_group(request: pytest.FixtureRequest) -> ParallelSampler:
    """The run's one group of two gloo ranks splitting the tiny kit with xDiT (`xfuser_on_cpu`),
    for the modules marked `worker_group(shared="xfuser")`."""
    from inline_core.parallel.sampler import ParallelSampler
    from tests.parallel.parallel_support import xfuser_config

    return shared_sampler(
        request, "xfuser", lambda: ParallelSampler(xfuser_config("xfuser_on_cpu:load"), retries=0)
    )
