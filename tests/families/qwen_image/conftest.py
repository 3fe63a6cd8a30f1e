from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # helpers live next to this file
    sys.path.insert(0, str(HERE))

from inline_core.families.qwen_image.kit import KitPaths, build_kit  # noqa: E402
from inline_core.sampling.loop import StepLoopSampler  # noqa: E402


@pytest.fixture(scope="session")
def qwen_kit(tmp_path_factory: pytest.TempPathFactory) -> KitPaths:
    """The tiny Qwen-Image and Qwen-Image-Edit stacks in both layouts, built once per session."""
    return build_kit(tmp_path_factory.mktemp("qwen") / "models")


@pytest.fixture(scope="session")
def qwen_sampler() -> Iterator[StepLoopSampler]:
    s = StepLoopSampler()
    yield s
    s.close()


@pytest.fixture(scope="session")
def text_reference(qwen_kit: KitPaths) -> Any:
    """diffusers' own QwenImagePipeline over the kit's diffusers folder: the pixel reference."""
    from qwen_harness import reference_pipe

    return reference_pipe("QwenImagePipeline", qwen_kit.diffusers_dir)


@pytest.fixture(scope="session")
def edit_reference(qwen_kit: KitPaths) -> Any:
    """diffusers' own QwenImageEditPlusPipeline over the kit's edit folder."""
    from qwen_harness import reference_pipe

    return reference_pipe("QwenImageEditPlusPipeline", qwen_kit.edit_diffusers_dir)


@pytest.fixture(scope="session")
def edit_2511_reference(qwen_kit: KitPaths) -> Any:
    """diffusers' own QwenImageEditPlusPipeline over the kit's Edit 2511 folder."""
    from qwen_harness import reference_pipe

    return reference_pipe("QwenImageEditPlusPipeline", qwen_kit.edit_2511_diffusers_dir)
