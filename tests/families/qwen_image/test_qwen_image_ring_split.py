"""Qwen-Image split with Ring, over Ulysses groups (USP: ulysses=2, ring=2, four gloo ranks): its
own ring attention (`families/masked_ring.py`) masks each ring step's keys with their slice of
the whole sequence's mask, and each Ulysses group trades heads for tokens around it
(`families/ulysses_ring.py`), so the take equals the in-process take with pads in the image and
the prompt, and a prompt and its negative of other lengths in one forward. Ring alone is that
ring with no Ulysses group around it: its merge is checked on its own against one masked
attention, a step whose keys are all masked included (`test_qwen_image_ring_alone_split.py`
renders it on two ranks). One group serves the module (`qwen-ring`): a group holds one split, and
the four-rank one exercises the ring and the Ulysses trades together. The edits' hooks
(references, 2511's modulation index) are the Ulysses split's, which `test_qwen_image_split.py`
renders."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from qwen_harness import PROMPT
from split_harness import Stacks, assert_split_equals_alone, stacks_beside

from inline_core.device.split import ParallelSpec
from inline_core.families.masked_ring import Arrival, MaskedRing
from inline_core.families.qwen_image import QwenImageFamily
from inline_core.families.qwen_image.descriptor import NODE_TYPE
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.models.catalog import Catalog
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from tests.parallel.parallel_support import split_group_config
from tests.worker_groups import shared_sampler

pytestmark = pytest.mark.worker_group(shared="qwen-ring")

USP = ParallelSpec.parse("ulysses=2,ring=2")


@pytest.fixture(scope="module")
def family(qwen_kit: KitPaths) -> QwenImageFamily:
    return QwenImageFamily(Catalog(qwen_kit.root), {})


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    def make() -> ParallelSampler:
        return ParallelSampler(split_group_config(USP, DEFAULT_RUNNER), retries=1)

    return shared_sampler(request, "qwen-ring", make)


@pytest.fixture(scope="module")
def stacks(family: QwenImageFamily, group: ParallelSampler) -> Iterator[Stacks]:
    yield from stacks_beside(family, group)


RENDERS: dict[str, dict[str, Any]] = {
    # 48x48: 9 image tokens, one a pad; guided: the negative prompt's row is masked past its end
    "odd image, guided": {"width": 48, "height": 48, "guidance": 4.0},
    "odd prompt": {"prompt": "a fox", "width": 64, "height": 48, "guidance": 1.0},
}


@pytest.mark.parametrize("name", list(RENDERS))
def test_a_ring_over_ulysses_render_equals_the_in_process_render(
    name: str, group: ParallelSampler, stacks: Stacks
) -> None:
    spec: dict[str, Any] = {"prompt": PROMPT, "steps": 3, "seed": 5, "guidance": 4.0}
    spec.update(RENDERS[name])
    assert_split_equals_alone(spec, group, stacks)


def test_ring_steps_merge_to_one_masked_attention() -> None:
    """Three ranks' keys attended one at a time, in the order rank 1 meets them, merged: one
    attention over all keys under the mask, though every key of the first rank is masked for the
    first row."""
    generator = torch.Generator().manual_seed(0)
    batch, tokens, heads, width, ranks = 2, 5, 2, 8, 3
    q, k, v = (
        torch.randn(batch, tokens * ranks, heads, width, generator=generator) for _ in range(3)
    )
    mask = torch.rand(batch, tokens * ranks, generator=generator) > 0.3
    mask[0, :tokens] = False
    whole = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask[:, None, None]
    ).transpose(1, 2)
    mine = slice(tokens, 2 * tokens)
    ring = _OneProcessRing(rank=1, ranks=ranks, keys=k, values=v)
    got = ring.attend(q[:, mine], k[:, mine], v[:, mine], mask[:, None, None, :])
    assert float((got - whole[:, mine]).abs().max()) < 1e-5
    assert ring.passes == ranks - 1


class _OneProcessRing(MaskedRing):
    """A ring whose passes hand over the previous rank's keys from whole tensors, in process."""

    def __init__(self, rank: int, ranks: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__(rank, ranks)
        self.keys, self.values = keys, values
        self.passes = 0

    def _pass_on(self, key: torch.Tensor, value: torch.Tensor) -> Arrival:
        self.passes += 1
        tokens = int(key.shape[1])
        owner = (self.rank - self.passes) % self.ranks
        held = slice(owner * tokens, (owner + 1) * tokens)
        return lambda: (self.keys[:, held], self.values[:, held])


def test_ring_is_offered_alone_and_with_ulysses(family: QwenImageFamily) -> None:
    assert family.describe()["splitMethods"] == ["ring", "ulysses"]
    for split in ("ring=2", "ulysses=2,ring=2", "ulysses=8,ring=2"):
        assert family.unsplittable(NODE_TYPE, {}, ParallelSpec.parse(split), None) is None
