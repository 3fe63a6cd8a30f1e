from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers live next to this file
    sys.path.insert(0, str(HERE))

from inline_core.families.ltx2.kit import LTX2Kit, write_kit  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402


@pytest.fixture(scope="session")
def ltx2_kit(tmp_path_factory: pytest.TempPathFactory) -> LTX2Kit:
    """The tiny LTX-2 stack, built once per session."""
    return write_kit(tmp_path_factory.mktemp("ltx2") / "models")


@pytest.fixture(scope="session")
def ltx2_sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def ltx2_reference(ltx2_kit: LTX2Kit) -> Any:
    """diffusers' own LTX2Pipeline over the kit's folder: the reference."""
    import torch
    from diffusers import LTX2Pipeline  # pyright: ignore[reportPrivateImportUsage]

    pipe: Any = LTX2Pipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
        str(ltx2_kit.diffusers_dir), dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


@pytest.fixture
def client(ltx2_kit: LTX2Kit, tmp_path: Path) -> Iterator[Any]:
    """The app over the kit's models, in process (ASGI), CPU float32."""
    from tests.server.server_support import cpu_client

    with cpu_client(ltx2_kit.root, tmp_path / "data") as c:
        yield c


@pytest.fixture(scope="session")
def ltx25_kit(tmp_path_factory: pytest.TempPathFactory) -> LTX2Kit:
    """The tiny LTX-2.5 stack (Gemma 4, the diffusion video decoder), built once per session."""
    from inline_core.families.ltx2.kit_ltx25 import write_ltx25_kit

    return write_ltx25_kit(tmp_path_factory.mktemp("ltx25") / "models")


@pytest.fixture(scope="module")
def ltx25_reference(ltx25_kit: LTX2Kit) -> tuple[Any, Any]:
    """diffusers' LTX2Pipeline and its diffusion-decode pipeline over the kit's 2.5 folder."""
    import torch

    from inline_core.diffusion.libs import diffusers
    from inline_core.families.ltx2.ltx25 import DECODER_SUBFOLDER

    lib = diffusers()
    folder = str(ltx25_kit.diffusers_dir)
    pipe: Any = lib.LTX2Pipeline.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
    model: Any = lib.LTX2VideoDiffusionDecoderModel.from_pretrained(
        folder, subfolder=DECODER_SUBFOLDER, dtype=torch.float32, local_files_only=True
    )
    decoder: Any = lib.LTX2VideoDiffusionDecodePipeline(
        diffusion_decoder=model, scheduler=pipe.scheduler, vae=pipe.vae
    )
    pipe.set_progress_bar_config(disable=True)
    decoder.set_progress_bar_config(disable=True)
    return pipe, decoder
