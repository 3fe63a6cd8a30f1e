from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers live next to this file
    sys.path.insert(0, str(HERE))

from inline_core.families.zimage.kit import KitPaths, build_kit  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402


@pytest.fixture(scope="session")
def kit(tmp_path_factory: pytest.TempPathFactory) -> KitPaths:
    """The tiny models in both layouts, built once per session (a few seconds)."""
    return build_kit(tmp_path_factory.mktemp("zimage") / "models")


@pytest.fixture(scope="session")
def sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def zimage_live(kit: KitPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real uvicorn over the kit's models for the live tests (one start and one set of model
    loads, not one per test): float32, taesd previews at 16 px by default (the previews test reads
    them; the others' takes do not depend on previews). Each test reads only its own runs."""
    from tests.server.server_support import LiveServer

    env = {
        "INLINE_PREVIEW_METHOD": "taesd",
        "INLINE_PREVIEW_SIZE": "16",
        "INLINE_DTYPE": "float32",
        "INLINE_MIN_FREE_DISK_MB": "0",
    }
    root = tmp_path_factory.mktemp("zimage_live")
    live = LiveServer(data_dir=root / "data", models_dir=kit.root, env=env)
    live.start(timeout=240.0)  # a liveness bound (a start on a loaded machine)
    try:
        yield live
    finally:
        live.close()


@pytest.fixture(scope="session")
def reference_pipe(kit: KitPaths) -> Any:
    """diffusers' own ZImagePipeline over the kit's diffusers folder: the pixel reference."""
    import torch
    from diffusers import ZImagePipeline  # pyright: ignore[reportPrivateImportUsage]

    assert kit.diffusers_dir is not None
    pipe: Any = ZImagePipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe
