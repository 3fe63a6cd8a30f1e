"""Qwen-Image split over a worker group of two gloo ranks (its own plan on cache-dit's Ulysses,
`split_plan.py`): the take equals the in-process take with prompts and images whose token counts
the ranks do not divide (padded and masked), with guidance (a prompt and its negative of other
lengths share a forward under a mask), with the step cache, and for Edit 2509 and 2511 with one,
two and three references (2511's modulation index sharded with the image); each rank's attention
saw its half of the padded image (`split_harness.py`, with the tolerance). The run's shared
cache-dit group renders it (`tests/worker_groups.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from qwen_harness import EDIT_2511_MODEL, EDIT_MODEL, PROMPT, TEXT_MODEL, source_image
from split_harness import Stacks, assert_split_equals_alone, stacks_beside

from inline_core.device.split import ParallelSpec
from inline_core.families.qwen_image import QwenImageFamily
from inline_core.families.qwen_image.descriptor import NODE_TYPE
from inline_core.families.qwen_image.kit import KitPaths
from inline_core.families.qwen_image.split_plan import ImagePads
from inline_core.models.catalog import Catalog
from inline_core.parallel.runner import DEFAULT_RUNNER
from inline_core.parallel.sampler import ParallelSampler
from inline_core.runtime.step_cache import StepCacheSettings
from tests.parallel.parallel_support import group_config
from tests.worker_groups import shared_sampler

pytestmark = pytest.mark.worker_group(shared="cache-dit")

SHORT = "a fox"
LOOSE = StepCacheSettings(threshold=0.9, warmup=2, front_blocks=1, max_consecutive=2)


@pytest.fixture(scope="module")
def family(qwen_kit: KitPaths) -> QwenImageFamily:
    return QwenImageFamily(Catalog(qwen_kit.root), {})


@pytest.fixture(scope="module")
def group(request: pytest.FixtureRequest) -> ParallelSampler:
    return shared_sampler(
        request, "cache-dit", lambda: ParallelSampler(group_config(DEFAULT_RUNNER), retries=1)
    )


@pytest.fixture(scope="module")
def stacks(family: QwenImageFamily, group: ParallelSampler) -> Iterator[Stacks]:
    yield from stacks_beside(family, group)


REFERENCE = Image.fromarray(np.random.default_rng(3).integers(0, 255, (40, 56, 3), np.uint8))
# References of other aspect ratios: each its own (frame, rows, columns) in the image shapes, so
# the rotary table, the pads and (2511) the modulation index span references of unequal lengths.
WIDE, TALL = source_image(72, 40, seed=4), source_image(40, 64, seed=5)
RENDERS: dict[str, dict[str, Any]] = {
    # 48x48: 3x3 patches, 9 image tokens; the prompts' lengths as the kit's tokenizer gives them
    "odd image, guided": {"width": 48, "height": 48, "guidance": 4.0},
    "odd prompt": {"prompt": SHORT, "width": 64, "height": 48, "guidance": 1.0},
    "even image, guided": {"width": 64, "height": 64, "guidance": 4.0},
    # the step cache deciding on all-reduced sums over padded shards
    "cached": {"width": 48, "height": 48, "guidance": 4.0, "steps": 8, "step_cache": LOOSE},
    # Edit 2511: the reference's tokens after the output's, marked by the modulation index
    "edit 2511": {"model": EDIT_2511_MODEL, "width": 48, "height": 64, "images": (REFERENCE,)},
    # Edit 2511 and 2509 with three and two references (2511's beside each other: one load)
    "edit 2511, three references": {
        "model": EDIT_2511_MODEL,
        "width": 64,
        "height": 48,
        "images": (REFERENCE, WIDE, TALL),
    },
    "edit 2509, two references": {
        "model": EDIT_MODEL,
        "width": 48,
        "height": 48,
        "images": (REFERENCE, WIDE),
    },
}


@pytest.mark.parametrize("name", list(RENDERS))
def test_a_split_render_equals_the_in_process_render(
    name: str, group: ParallelSampler, stacks: Stacks
) -> None:
    spec: dict[str, Any] = {"prompt": PROMPT, "steps": 3, "seed": 5, "guidance": 4.0}
    spec.update(RENDERS[name])
    state, remote = assert_split_equals_alone(spec, group, stacks)
    if "step_cache" in spec:  # every rank decided alike: the counts of one process
        assert state.cache.stats()["reusedSteps"] > 0
        assert remote.cache.stats() == state.cache.stats()


def test_the_renders_cover_odd_prompts_and_odd_images(stacks: Stacks) -> None:
    """What the renders above are for: a prompt, and an image, the two ranks cannot halve."""
    _, pipeline = stacks(TEXT_MODEL)
    prompt = pipeline.request(prompt=SHORT, width=64, height=48, steps=2, seed=0, guidance=1.0)
    pipeline.prepare_encode(prompt)
    assert prompt.positive is not None
    assert int(prompt.positive.value.shape[0]) % 2 == 1
    image = pipeline.request(prompt=PROMPT, width=48, height=48, steps=2, seed=0, guidance=1.0)
    pipeline.prepare_encode(image)
    assert image.latents is not None
    assert int(image.latents.value.shape[1]) % 2 == 1  # the packed image tokens the model sees


def test_ulysses_is_offered_over_the_heads(family: QwenImageFamily) -> None:
    sources = family.resolve(NODE_TYPE, {"model": TEXT_MODEL}).require()
    support = family.split_support(sources.get("transformer"))
    assert support is not None and support.methods == frozenset({"ulysses", "ring"})
    assert support.heads is not None and support.allows_ulysses(2)
    caps = family.describe()
    assert caps["splitEngines"] == ["cache-dit"]
    assert (
        family.unsplittable(NODE_TYPE, {"width": 48}, ParallelSpec.parse("ulysses=2"), None) is None
    )


def test_pads_sit_before_the_last_shard_and_come_out_again() -> None:
    for tokens in (1, 5, 9, 16, 83 * 83):
        for ranks in (2, 3, 4):
            pads = ImagePads(tokens, ranks)
            x = torch.arange(tokens).view(1, tokens, 1)
            padded = pads.insert(x, 1)
            assert padded.shape[1] == pads.shard * ranks
            last = padded.chunk(ranks, dim=1)[-1]
            assert bool(pads.real(1, x.device).chunk(ranks, dim=1)[-1].all())
            assert torch.equal(last.flatten(), torch.arange(tokens - pads.shard, tokens))
            assert torch.equal(pads.remove(padded, 1), x)
            assert int((~pads.real(1, x.device)).sum()) == pads.pads
