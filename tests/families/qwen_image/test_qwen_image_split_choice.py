"""The automatic split for Qwen-Image only picks what it runs: it cannot combine Ulysses and Ring
(its mask is laid out for one of them), so where its 24 heads leave Ulysses short of the GPUs it
rings all of them, and never picks a split its submit check would refuse. A family that combines
the two, with the same heads, still gets the hybrid. Pure planning: no ranks start."""

from __future__ import annotations

from dataclasses import replace

import pytest

from inline_core.device import ParallelSpec, choose_split
from inline_core.families.qwen_image.split import parallel_support, split_refusal
from tests.device.device_machines import gpus

QWEN = parallel_support(24)  # the 20B's attention heads


@pytest.mark.parametrize("nvlink", [True, False])
@pytest.mark.parametrize("count", [2, 4, 8, 12, 16, 32])
def test_the_automatic_split_is_one_qwen_image_runs_on_every_gpu(count: int, nvlink: bool) -> None:
    spec = choose_split(gpus(count, nvlink=nvlink), QWEN)
    assert spec is not None
    assert split_refusal(spec, QWEN) is None, str(spec)
    assert spec.world_size == count  # no GPU left idle


@pytest.mark.parametrize(
    ("count", "expected"),
    [(8, "ulysses=8"), (12, "ulysses=12"), (16, "ring=16"), (32, "ring=32")],
)  # fmt: skip
def test_nvlink_takes_ulysses_where_the_heads_cover_the_gpus_else_ring(
    count: int, expected: str
) -> None:
    assert str(choose_split(gpus(count, nvlink=True), QWEN)) == expected


@pytest.mark.parametrize(
    ("count", "expected"), [(16, "ulysses=8,ring=2"), (32, "ulysses=8,ring=4")]
)  # fmt: skip
def test_a_family_that_combines_them_still_gets_the_hybrid(count: int, expected: str) -> None:
    combines = replace(QWEN, family="combines", ulysses_with_ring=True)
    assert str(choose_split(gpus(count, nvlink=True), combines)) == expected


def test_the_refusal_at_submit_names_only_splits_the_heads_allow() -> None:
    both = choose_split(gpus(16, nvlink=True), replace(QWEN, ulysses_with_ring=True))
    assert str(both) == "ulysses=8,ring=2"
    assert both is not None
    why = split_refusal(both, QWEN)
    assert why is not None and why.endswith("set INLINE_PARALLEL to ring=16")  # 16 splits no 24
    four = split_refusal(ParallelSpec.of(ulysses=2, ring=2), QWEN)
    assert four is not None and four.endswith("ulysses=4 or ring=4")
