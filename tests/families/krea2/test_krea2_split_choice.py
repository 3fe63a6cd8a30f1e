"""What Krea 2 splits with (Ulysses, Ring, both), read from its files, and what a split refuses:
a render whose image tokens the ranks cannot share evenly is a 422 at submit naming its size and
the fix, a split the model cannot run stops the server, and a server given a split runs Krea 2 on
it, Ring too (no longer in process). No worker group starts here (the split renders:
`test_krea2_split.py`, `test_krea2_ring_split.py`, `test_krea2_usp_split.py`)."""

from __future__ import annotations

import logging

import pytest

from inline_core.device.split import ParallelSpec
from inline_core.errors import InvalidRequest
from inline_core.families.krea2 import Krea2Family
from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.kit import TRANSFORMER_CONFIG, Krea2Kit
from inline_core.families.krea2.split import sequence_refusal, support_for
from inline_core.graph.runner import SubmitFacts
from inline_core.models.catalog import Catalog
from tests.families.split_server import node_runner, split_server

ULYSSES_2 = ParallelSpec.parse("ulysses=2")
MODEL = "krea2_tiny.safetensors"  # Krea's naming, as ComfyUI's file
FOLDER = "krea2_tiny_diffusers"
ODD = {"width": 48, "height": 48}  # 3x3 patches: 9 image tokens, which 2 ranks cannot share


@pytest.mark.parametrize("model", [MODEL, FOLDER])
def test_the_family_declares_cache_dit_ulysses_and_ring_over_its_heads(
    krea2_kit: Krea2Kit, model: str
) -> None:
    family = Krea2Family(Catalog(krea2_kit.root), {})
    caps = family.describe()
    assert (caps["splitMethods"], caps["splitEngines"]) == (["ring", "ulysses"], ["cache-dit"])
    sources = family.resolve(NODE_TYPE, {"model": model}).require()
    support = family.split_support(sources.get("transformer"))
    assert support.heads == TRANSFORMER_CONFIG["num_attention_heads"] == 2  # read from its files
    assert support.ulysses_degrees == (2,)
    assert support.allows_sequence_ranks(2) and not support.allows_sequence_ranks(3)  # 512 text
    assert support.ulysses_with_ring  # the masked ring runs over Ulysses groups
    assert support_for(None).heads is None  # unknown until a model is read


def test_image_tokens_the_ranks_cannot_share_are_refused_with_the_fix() -> None:
    assert sequence_refusal({"width": 1024, "height": 1024}, ULYSSES_2) is None
    assert sequence_refusal({"width": 48, "height": 64}, ULYSSES_2) is None  # 12 tokens
    assert sequence_refusal(ODD, ParallelSpec()) is None  # no split: nothing to share
    assert sequence_refusal({"width": 40, "height": 48}, ULYSSES_2) is None  # the request's 422
    why = sequence_refusal(ODD, ULYSSES_2)
    assert why is not None and why.startswith("48x48 is 9 image tokens for Krea 2 (3x3 patches")
    assert "the 2 ranks of this server's split (INLINE_PARALLEL=ulysses=2)" in why
    assert "a side of a multiple of 32 px fits" in why
    assert "or render it on a server without INLINE_PARALLEL" in why
    four = sequence_refusal({"width": 1040, "height": 1040}, ParallelSpec.parse("ulysses=4"))
    assert four is not None and "4225 image tokens" in four and "multiple of 64 px" in four


@pytest.mark.parametrize(
    ("split", "odd", "words"),
    [
        ("ulysses=2", ODD, "48x48 is 9 image tokens"),
        ("ring=2", ODD, "48x48 is 9 image tokens"),
        # 18 tokens: two ranks could share them, four cannot
        ("ulysses=2,ring=2", {"width": 96, "height": 48}, "96x48 is 18 image tokens"),
    ],
)
def test_a_split_server_runs_krea2_on_its_group_and_refuses_odd_sizes_at_submit(
    krea2_kit: Krea2Kit,
    caplog: pytest.LogCaptureFixture,
    split: str,
    odd: dict[str, int],
    words: str,
) -> None:
    caplog.set_level(logging.WARNING)
    with split_server(Krea2Family, krea2_kit.root, split) as (runtime, family, registry):
        runner = node_runner(registry, NODE_TYPE)
        sources = family.resolve(NODE_TYPE, {"model": MODEL}).require()
        spec = ParallelSpec.parse(split)
        assert runtime.split_for(family, sources.get("transformer")) == spec
        runner.check_node("k", {"model": MODEL, "width": 64, "height": 48}, SubmitFacts.bare())
        with pytest.raises(InvalidRequest, match=words) as refused:
            runner.check_node("k", {"model": MODEL, **odd}, SubmitFacts.bare())
        assert refused.value.status == 422 and refused.value.node_id == "k"
        assert f"the {spec.world_size} ranks of this server's split (INLINE_PARALLEL={spec})" in (
            refused.value.message
        )
    assert "run in process" not in caplog.text  # no fallback: Krea 2 renders on the split


@pytest.mark.parametrize(
    ("split", "why"),
    [
        ("ring=3", "krea-2 pads its token sequence to multiples of 512, so ulysses x ring must"),
        ("ulysses=3", "krea-2 pads its token sequence to multiples of 512, so ulysses x ring must"),
        ("ulysses=4", "a ulysses degree must divide the 2 attention heads of krea-2"),
    ],
)
def test_a_split_the_model_cannot_run_is_refused_at_start(
    krea2_kit: Krea2Kit, split: str, why: str
) -> None:
    with pytest.raises(InvalidRequest, match=why), split_server(Krea2Family, krea2_kit.root, split):
        pass
