"""The automatic split for Qwen-Image is one it runs: it combines Ulysses and Ring (USP), so where
its 24 heads leave Ulysses short of the GPUs Ring takes the rest, and its submit check refuses
none of them. Pure planning: no ranks start (`test_qwen_image_ring_split.py` renders USP)."""

from __future__ import annotations

import pytest

from inline_core.device import choose_split
from inline_core.families.qwen_image import QwenImageFamily
from inline_core.families.qwen_image.descriptor import NODE_TYPE
from inline_core.families.qwen_image.split import parallel_support
from inline_core.models.catalog import Catalog
from tests.device.device_machines import gpus

QWEN = parallel_support(24)  # the 20B's attention heads


@pytest.mark.parametrize(
    ("count", "nvlink", "expected"),
    [
        (8, True, "ulysses=8"),
        (12, True, "ulysses=12"),
        (16, True, "ulysses=8,ring=2"),
        (32, True, "ulysses=8,ring=4"),
        (16, False, "ring=16"),
        (32, False, "ring=32"),
    ],
)  # fmt: skip
def test_the_automatic_split_is_one_qwen_image_runs_on_every_gpu(
    count: int, nvlink: bool, expected: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    spec = choose_split(gpus(count, nvlink=nvlink), QWEN)
    assert str(spec) == expected
    assert spec is not None and spec.world_size == count  # no GPU left idle
    family = QwenImageFamily(Catalog(tmp_path_factory.mktemp("models")), {})
    assert family.unsplittable(NODE_TYPE, {}, spec, None) is None
