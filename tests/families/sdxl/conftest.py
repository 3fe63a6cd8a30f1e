from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers live next to this file
    sys.path.insert(0, str(HERE))

from fastapi.testclient import TestClient  # noqa: E402

from inline_core.families.sdxl.kit import SDXLKit, build_kit  # noqa: E402
from inline_core.families.sdxl.kit_sd15 import SD15Kit, build_sd15_kit  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402
from tests.server.server_support import cpu_client  # noqa: E402


@pytest.fixture(scope="session")
def sdxl_kit(tmp_path_factory: pytest.TempPathFactory) -> SDXLKit:
    """The tiny SDXL models in both layouts, built once per session."""
    return build_kit(tmp_path_factory.mktemp("sdxl") / "models")


@pytest.fixture(scope="session")
def sd15_kit(tmp_path_factory: pytest.TempPathFactory) -> SD15Kit:
    """The tiny SD 1.5 checkpoint (and its tokenizer), built once per session."""
    return build_sd15_kit(tmp_path_factory.mktemp("sd15") / "models")


@pytest.fixture(scope="session")
def sdxl_sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def sdxl_reference(sdxl_kit: SDXLKit) -> Any:
    """diffusers' StableDiffusionXLPipeline over the kit's checkpoint (`from_single_file`, its
    configs from the kit's diffusers folder: offline): the pixel reference."""
    import torch
    from diffusers import StableDiffusionXLPipeline  # pyright: ignore[reportPrivateImportUsage]

    assert sdxl_kit.checkpoint is not None and sdxl_kit.diffusers_dir is not None
    pipe: Any = StableDiffusionXLPipeline.from_single_file(  # pyright: ignore[reportUnknownMemberType]
        str(sdxl_kit.checkpoint),
        config=str(sdxl_kit.diffusers_dir),
        torch_dtype=torch.float32,
        local_files_only=True,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture
def client(sdxl_kit: SDXLKit, tmp_path: Path) -> Iterator[TestClient]:
    """The server over the kit's models, on the CPU in float32."""
    with cpu_client(sdxl_kit.root, tmp_path / "data") as c:
        yield c
