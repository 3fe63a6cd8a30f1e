from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers live next to this file
    sys.path.insert(0, str(HERE))

from inline_core.families.skyreels.kit import SkyReelsKit, build_kit  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402


@pytest.fixture(scope="session")
def skyreels_kit(tmp_path_factory: pytest.TempPathFactory) -> SkyReelsKit:
    """The tiny SkyReels-V2 DF model, built once per session (a second or two)."""
    return build_kit(tmp_path_factory.mktemp("skyreels") / "models")


@pytest.fixture(scope="session")
def skyreels_sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def skyreels_reference(skyreels_kit: SkyReelsKit) -> Any:
    """diffusers' own SkyReelsV2DiffusionForcingPipeline over the kit's folder."""
    from skyreels_harness import reference_pipe

    return reference_pipe(skyreels_kit.diffusers_dir)


@pytest.fixture(scope="session")
def socket_server(
    skyreels_kit: SkyReelsKit, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Path]]:
    """One held server (`skyreels_server.held_server`) for the socket tests, nothing held until
    a test's `held_run_socket` holds its own run: one start and one model load for them all.
    Each test renders its own seed, so no run of one is answered from another's node cache."""
    from skyreels_server import held_server

    with held_server(skyreels_kit, tmp_path_factory.mktemp("skyreels_sockets")) as (live, hold):
        hold.unlink()
        yield live, hold
