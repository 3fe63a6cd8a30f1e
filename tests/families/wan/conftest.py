from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers live next to this file
    sys.path.insert(0, str(HERE))

from inline_core.config import Config  # noqa: E402
from inline_core.families.wan.kit import WanKit, build_kit  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402


@pytest.fixture(scope="session")
def wan_kit(tmp_path_factory: pytest.TempPathFactory) -> WanKit:
    """The tiny Wan models in both layouts, built once per session (a few seconds)."""
    return build_kit(tmp_path_factory.mktemp("wan") / "models")


@pytest.fixture(scope="session")
def wan_sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def wan_reference(wan_kit: WanKit) -> Any:
    """diffusers' own WanPipeline over the kit's diffusers folder: the pixel reference."""
    import torch
    from diffusers import WanPipeline  # pyright: ignore[reportPrivateImportUsage]

    assert wan_kit.diffusers_dir is not None
    pipe: Any = WanPipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(wan_kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="module")
def a14b_reference(wan_kit: WanKit) -> Any:
    """diffusers' WanPipeline over the kit's A14B folder (both transformers, its boundary); one
    per module, as the LoRA tests load adapters into it."""
    from wan_harness import reference_pipe

    from inline_core.families.wan.kit import A14B_BOUNDARY

    pipe = reference_pipe("WanPipeline", wan_kit.a14b_diffusers_dir)
    assert pipe.transformer_2 is not None and pipe.config.boundary_ratio == A14B_BOUNDARY
    return pipe


@pytest.fixture(scope="session")
def ti2v_reference(wan_kit: WanKit) -> Any:
    """diffusers' WanPipeline over the kit's Wan 2.2 TI2V folder (`expand_timesteps`)."""
    import torch
    from diffusers import WanPipeline  # pyright: ignore[reportPrivateImportUsage]

    assert wan_kit.ti2v_diffusers_dir is not None
    pipe: Any = WanPipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(wan_kit.ti2v_diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    assert pipe.config.expand_timesteps
    return pipe


@pytest.fixture(scope="session")
def i2v_reference(ti2v_reference: Any) -> Any:
    """diffusers' WanImageToVideoPipeline over the same TI2V parts (its Wan 2.2 5B path)."""
    from diffusers import WanImageToVideoPipeline  # pyright: ignore[reportPrivateImportUsage]

    names = ("tokenizer", "text_encoder", "vae", "scheduler", "transformer")
    parts = {name: getattr(ti2v_reference, name) for name in names}
    pipe: Any = WanImageToVideoPipeline(**parts, expand_timesteps=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="session")
def wan_live(wan_kit: WanKit, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real uvicorn over the kit's models, float32, for the tests that only need a live
    server to render on (one start and one set of model loads for all of them, not one each).
    Each of those tests reads only its own runs and leaves none running; none changes the
    models folder. One run worker: the streaming test queues its render behind a slow node."""
    from tests.server.server_support import LiveServer

    root = tmp_path_factory.mktemp("wan_live")
    env = {"INLINE_DTYPE": "float32", "INLINE_RUN_WORKERS": "1"}
    live = LiveServer(data_dir=root / "data", models_dir=wan_kit.root, env=env)
    live.start(timeout=240.0)  # a liveness bound (a start on a loaded machine)
    try:
        yield live
    finally:
        live.close()


@pytest.fixture
def client(wan_kit: WanKit, tmp_path: Path) -> Iterator[Any]:
    """The app over the kit's models, in process (ASGI), CPU float32."""
    from fastapi.testclient import TestClient

    from inline_core.server.app import create_app

    config = Config(
        models_dir=wan_kit.root, data_dir=tmp_path / "data", profile="cpu", dtype="float32"
    )
    with TestClient(create_app(config)) as c:
        yield c
