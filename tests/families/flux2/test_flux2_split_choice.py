"""What FLUX.2 splits with (Ulysses, Ring, both), read from its files, and what a split refuses:
a render whose image tokens the ranks cannot share evenly is a 422 at submit, a split the model
cannot run stops the server, and a server given a split runs FLUX.2 on it, Ring too (no longer
in process). No worker group starts here (the split renders: tests/parallel/test_parallel_flux2.py,
`test_flux2_ring_split.py`, `test_flux2_usp_split.py`). Reference images' tokens count too: at
submit where their sizes are known, on the ranks where they are known only at run."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from PIL import Image

from inline_core.config import Config
from inline_core.device.split import ParallelSpec
from inline_core.errors import InvalidRequest
from inline_core.families.flux2 import Flux2Family
from inline_core.families.flux2.descriptor import NODE_TYPE
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.pipeline import reference_pixels
from inline_core.families.flux2.request import reference_size
from inline_core.families.flux2.split import sequence_refusal, support_for
from inline_core.families.standalone import family_rig
from inline_core.graph.runner import SubmitFacts
from inline_core.models.catalog import Catalog
from inline_core.sampling.loop import StepLoopSampler
from tests.families.split_server import node_runner, split_server

ULYSSES_2 = ParallelSpec.parse("ulysses=2")
MODEL = "flux2_klein_base_tiny.safetensors"
ODD = {"width": 48, "height": 48}  # 3x3 patches: 9 image tokens, which 2 ranks cannot share


def test_the_family_declares_cache_dit_ulysses_and_ring_over_its_heads(flux2_kit: Flux2Kit) -> None:
    family = Flux2Family(Catalog(flux2_kit.root), {})
    caps = family.describe()
    assert (caps["splitMethods"], caps["splitEngines"]) == (["ring", "ulysses"], ["cache-dit"])
    sources = family.resolve(NODE_TYPE, {"model": MODEL}).require()
    support = family.split_support(sources.get("transformer"))
    heads = support.heads
    assert heads is not None and heads >= 2  # the tiny model's own heads, from its file
    assert support.ulysses_degrees == tuple(d for d in range(2, heads + 1) if heads % d == 0)
    assert support.allows_sequence_ranks(2) and not support.allows_sequence_ranks(3)  # 512 text
    assert support.ulysses_with_ring  # the masked ring runs over Ulysses groups
    assert support_for(None).heads is None  # unknown until a model is read


def test_image_tokens_the_ranks_cannot_share_are_refused() -> None:
    assert sequence_refusal({"width": 1024, "height": 1024}, ULYSSES_2) is None
    assert sequence_refusal({"width": 48, "height": 64}, ULYSSES_2) is None  # 12 tokens
    assert sequence_refusal(ODD, ParallelSpec()) is None  # no split: nothing to share
    assert sequence_refusal({"width": 40, "height": 48}, ULYSSES_2) is None  # the request's 422
    why = sequence_refusal(ODD, ULYSSES_2)
    assert why is not None and why.startswith("48x48 is 9 image tokens for FLUX.2")
    assert "the 2 ranks of this server's split (INLINE_PARALLEL=ulysses=2)" in why
    assert "a side of a multiple of 32 px fits" in why


@pytest.mark.parametrize(
    ("split", "odd", "words"),
    [
        ("ulysses=2", ODD, "48x48 is 9 image tokens"),
        ("ring=2", ODD, "48x48 is 9 image tokens"),
        # 18 tokens: two ranks could share them, four cannot
        ("ulysses=2,ring=2", {"width": 96, "height": 48}, "96x48 is 18 image tokens"),
    ],
)
def test_a_split_server_runs_flux2_on_its_group_and_refuses_odd_sizes_at_submit(
    flux2_kit: Flux2Kit,
    caplog: pytest.LogCaptureFixture,
    split: str,
    odd: dict[str, int],
    words: str,
) -> None:
    caplog.set_level(logging.WARNING)
    with split_server(Flux2Family, flux2_kit.root, split) as (runtime, family, registry):
        runner = node_runner(registry, NODE_TYPE)
        sources = family.resolve(NODE_TYPE, {"model": MODEL}).require()
        spec = ParallelSpec.parse(split)
        assert runtime.split_for(family, sources.get("transformer")) == spec
        runner.check_node("f", {"model": MODEL, "width": 64, "height": 48}, SubmitFacts.bare())
        with pytest.raises(InvalidRequest, match=words) as refused:
            runner.check_node("f", {"model": MODEL, **odd}, SubmitFacts.bare())
        assert refused.value.status == 422 and refused.value.node_id == "f"
        why = refused.value.message
        assert f"the {spec.world_size} ranks of this server's split (INLINE_PARALLEL={spec})" in why
        assert f"a side of a multiple of {16 * spec.world_size} px fits" in why
    assert "run in process" not in caplog.text  # no fallback: FLUX.2 renders on the split


@pytest.mark.parametrize(
    ("split", "why"),
    [
        ("ring=3", "flux-2 pads its token sequence to multiples of 512, so ulysses x ring must"),
        ("ulysses=3", "ulysses x ring must divide 512"),
    ],
)
def test_a_split_the_model_cannot_run_is_refused_at_start(
    flux2_kit: Flux2Kit, split: str, why: str
) -> None:
    with pytest.raises(InvalidRequest, match=why), split_server(Flux2Family, flux2_kit.root, split):
        pass


def test_reference_images_tokens_count_toward_what_the_ranks_share() -> None:
    square = {"width": 64, "height": 64}  # 16 image tokens
    assert sequence_refusal(square, ULYSSES_2, [(64, 80)]) is None  # + 20
    assert sequence_refusal(ODD, ULYSSES_2, [(80, 80)]) is None  # 9 + 25: the sum is shared
    why = sequence_refusal(square, ULYSSES_2, [(64, 80), (80, 80)])  # 16 + 20 + 25
    assert why is not None
    assert why.startswith("64x64 with reference images encoded at 64x80, 80x80 is 61 image ")
    assert "(16 of the image's, 45 of its references'" in why
    assert "the 2 ranks of this server's split (INLINE_PARALLEL=ulysses=2)" in why
    # A reference over a megapixel counts as the pipeline scales it: 1100x1000 is encoded at
    # 1072x976 (67x61 tokens), where its own size would make 68x62.
    assert reference_size(1100, 1000) == (1072, 976)
    why = sequence_refusal(square, ULYSSES_2, [(1100, 1000)])
    assert why is not None and "encoded at 1072x976 is 4103 image tokens" in why


@pytest.mark.parametrize("size", [(64, 64), (100, 70), (1100, 1000), (2500, 1400), (700, 3000)])
def test_a_reference_is_encoded_at_the_size_the_submit_check_counts(size: tuple[int, int]) -> None:
    width, height = reference_size(*size)
    pixels = reference_pixels(Image.new("RGB", size, (200, 40, 40)))
    assert tuple(pixels.shape[-2:]) == (height, width)


def test_a_split_server_counts_uploaded_references_at_submit(flux2_kit: Flux2Kit) -> None:
    """Reference sizes known at submit join the count (a 422 naming them); a reference whose
    size is known only at run leaves the sum to the ranks' check."""
    with split_server(Flux2Family, flux2_kit.root) as (_runtime, _family, registry):
        runner = node_runner(registry, NODE_TYPE)
        square = {"model": MODEL, "width": 64, "height": 64}

        def facts(sizes: dict[str, tuple[int, int]]) -> SubmitFacts:
            return SubmitFacts(frozenset({"prompt", "image"}), lambda: sizes, {})

        runner.check_node("f", square, facts({"image": (64, 80)}))
        with pytest.raises(InvalidRequest, match="reference images encoded at 80x80") as refused:
            runner.check_node("f", square, facts({"image": (80, 80)}))
        assert refused.value.status == 422 and refused.value.node_id == "f"
        runner.check_node("f", {"model": MODEL, **ODD}, facts({"image": (80, 80)}))  # 9 + 25
        runner.check_node("f", {"model": MODEL, **ODD}, facts({}))  # its size comes at run


def test_a_rank_refuses_tokens_it_cannot_share_in_words_before_the_transformer(
    flux2_kit: Flux2Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference known only at run: the ranks' guard counts its encoded tokens and refuses a
    sum they cannot share with the cause and the fix, not cache-dit's "divisible by mesh size".
    Two ranks are what `torch.distributed` reports on a worker group's rank."""
    import torch

    config = Config(models_dir=flux2_kit.root, profile="cpu", dtype="float32")
    sampler = StepLoopSampler()
    rig = family_rig(Flux2Family, flux2_kit.root, sampler, config=config)
    try:
        pipe: Any = rig.pipeline(MODEL)
        monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
        monkeypatch.setattr(torch.distributed, "get_world_size", two_ranks)
        size = {"prompt": "a fox", "width": 64, "height": 64, "steps": 1, "guidance": 1.0}
        shared = pipe.request(**size, seed=1, image=Image.new("RGB", (64, 80)))  # 16 + 20
        pipe.prepare_encode(shared)
        assert shared.reference_shapes == ((5, 4),)
        unshared = pipe.request(**size, seed=1, image=Image.new("RGB", (80, 80)))  # 16 + 25
        with pytest.raises(InvalidRequest) as refused:
            pipe.prepare_encode(unshared)
        why = refused.value.message
        assert why.startswith("64x64 with reference images encoded at 80x80 is 41 image tokens")
        assert "the 2 ranks of this server's split (INLINE_PARALLEL)" in why
        assert "or render it on a server without INLINE_PARALLEL" in why
    finally:
        rig.close()
        sampler.close()


def two_ranks(group: object = None) -> int:
    """`torch.distributed.get_world_size` on a rank of a two-rank worker group."""
    return 2
