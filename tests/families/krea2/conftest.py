from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from inline_core.families.krea2.kit import Krea2Kit, build_kit
from inline_core.sampling.loop import StepLoopSampler


@pytest.fixture(scope="session")
def krea2_kit(tmp_path_factory: pytest.TempPathFactory) -> Krea2Kit:
    return build_kit(tmp_path_factory.mktemp("krea2") / "models")


@pytest.fixture(scope="session")
def krea_sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def krea_pipe(krea2_kit: Krea2Kit) -> Any:
    """diffusers' own Krea2Pipeline over the kit's folder: the pixel reference."""
    import torch
    from diffusers import Krea2Pipeline  # pyright: ignore[reportPrivateImportUsage]

    pipe: Any = Krea2Pipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(krea2_kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe
