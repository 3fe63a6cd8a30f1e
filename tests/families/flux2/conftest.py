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

from inline_core.config import Config  # noqa: E402
from inline_core.diffusion.libs import diffusers  # noqa: E402
from inline_core.families.flux2.kit import Flux2Kit, build_kit  # noqa: E402
from inline_core.families.flux2.kit_dev import Flux2DevKit, build_dev_kit  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402
from inline_core.server.app import create_app  # noqa: E402


@pytest.fixture(scope="session")
def flux2_kit(tmp_path_factory: pytest.TempPathFactory) -> Flux2Kit:
    """The tiny klein models in both layouts, built once per session."""
    return build_kit(tmp_path_factory.mktemp("flux2") / "models")


@pytest.fixture(scope="session")
def sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def klein_pipe(flux2_kit: Flux2Kit) -> Any:
    """diffusers' own Flux2KleinPipeline over the kit's diffusers folder: the pixel reference."""
    import torch

    assert flux2_kit.diffusers_dir is not None
    pipe: Any = diffusers().Flux2KleinPipeline.from_pretrained(
        str(flux2_kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="session")
def flux2_dev_kit(tmp_path_factory: pytest.TempPathFactory) -> Flux2DevKit:
    """The tiny FLUX.2 dev models, built once per session in a models folder of their own."""
    return build_dev_kit(tmp_path_factory.mktemp("flux2_dev") / "models")


@pytest.fixture(scope="session")
def dev_pipe(flux2_dev_kit: Flux2DevKit) -> Any:
    """diffusers' own Flux2Pipeline over the dev kit's diffusers folder: the pixel reference."""
    import torch

    assert flux2_dev_kit.diffusers_dir is not None
    pipe: Any = diffusers().Flux2Pipeline.from_pretrained(
        str(flux2_dev_kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture(scope="module")
def client(flux2_kit: Flux2Kit, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A server over the klein kit's models, one per test module."""
    data = tmp_path_factory.mktemp("flux2_server") / "data"
    config = Config(models_dir=flux2_kit.root, data_dir=data, profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as c:
        yield c


@pytest.fixture(scope="module")
def handle(flux2_kit: Flux2Kit) -> Any:
    """The server's handle on the kit's klein base model in a worker group's ranks, on CPU (the
    split tests: `flux2_split_harness.py`, imported here only where a test asks for it)."""
    from flux2_split_harness import split_handle

    return split_handle(flux2_kit)


@pytest.fixture(scope="module")
def local(handle: Any, group: Any) -> Iterator[Any]:
    """The pipeline in this process, built by the loader (and spec) the ranks of the module's
    `group` use, stepped at a rank's thread count (oneDNN's float reductions depend on it)."""
    from flux2_split_harness import in_process_at_rank_threads

    with in_process_at_rank_threads(handle, group) as pipeline:
        yield pipeline
