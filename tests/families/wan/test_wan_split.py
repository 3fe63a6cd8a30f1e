"""What Wan splits with, read from its files, and what a split refuses at submit: a render whose
token sequence the ranks cannot share evenly is a 422 naming the sizes that fit, a Ulysses degree
that does not divide the model's heads or a method cache-dit has no Wan plan for stops the server.
No worker group starts here (the split renders themselves: tests/parallel/test_parallel_wan.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_wan_server import wan_graph

from inline_core.config import Config
from inline_core.contract.registry import Families
from inline_core.device.split import ParallelSpec
from inline_core.engine.runtime import ModelRuntime
from inline_core.errors import InvalidRequest
from inline_core.families.nodes.register import register_families
from inline_core.families.wan import WanFamily
from inline_core.families.wan.descriptor import NODE_TYPE
from inline_core.families.wan.kit import WanKit
from inline_core.families.wan.split import (
    parallel_support,
    sequence_refusal,
    sequence_tokens,
    support_for,
)
from inline_core.families.wan.variants import A14B_T2V, T2V, TI2V
from inline_core.graph.registry import Registry
from inline_core.models.catalog import Catalog
from inline_core.sampling.loop import StepLoopSampler
from inline_core.server.app import create_app

ULYSSES_2 = ParallelSpec.parse("ulysses=2")
# 48x48 at one frame: 1 latent frame of 3x3 patches, 9 tokens, which 2 ranks cannot share.
ODD: dict[str, Any] = {"width": 48, "height": 48, "frames": 1}


def test_the_family_declares_cache_dit_ulysses_and_ring(wan_kit: WanKit) -> None:
    caps = WanFamily(Catalog(wan_kit.root), {}).describe()
    assert (caps["splitMethods"], caps["splitEngines"]) == (["ring", "ulysses"], ["cache-dit"])
    family = WanFamily(Catalog(wan_kit.root), {})
    for model in (None, "wan2.1_t2v_tiny_diffusers", "wan2.2_t2v_high_noise_tiny_fp32.safetensors"):
        sources = family.resolve(NODE_TYPE, {"model": model}).require()
        support = family.split_support(sources.get("transformer"))
        assert (support.family, support.heads) == ("wan", 2)  # the tiny models' own heads
        assert support.ulysses_degrees == (2,)
    assert support_for(None).heads is None  # unknown: any degree, until a model is read
    assert parallel_support(12).ulysses_degrees == (2, 3, 4, 6, 12)  # the 1.3B's 12 heads


def test_the_token_count_follows_each_variants_vae_and_patches() -> None:
    assert sequence_tokens(832, 480, 81, T2V) == 21 * 30 * 52 == 32_760  # divides 2, 4, 8
    assert sequence_tokens(1280, 704, 121, TI2V) == 31 * 22 * 40  # 16x down, 2x2 patches
    assert sequence_tokens(1280, 720, 81, A14B_T2V) == 21 * 45 * 80
    for spec in ("ulysses=2", "ulysses=2,ring=2", "ulysses=8"):
        assert sequence_refusal({}, T2V, ParallelSpec.parse(spec)) is None  # defaults fit
    assert sequence_refusal(ODD, T2V, ParallelSpec()) is None  # no split: nothing to share
    assert sequence_refusal({**ODD, "frames": 5}, T2V, ULYSSES_2) is None  # 2 latent frames
    why = sequence_refusal(ODD, T2V, ULYSSES_2)
    assert why is not None
    assert why.startswith("48x48 at 1 frames is 9 tokens for Wan 2.1 text-to-video")
    assert "the 2 ranks of this server's split (INLINE_PARALLEL=ulysses=2)" in why
    assert "frames 5, 13, 21, ... fit any size" in why
    four = sequence_refusal({**ODD, "frames": 5}, T2V, ParallelSpec.parse("ulysses=2,ring=2"))
    assert four is not None and "frames 13, 29, 45" in four  # 4, 8, 12 latent frames


@pytest.fixture
def split_client(wan_kit: WanKit, tmp_path: Path) -> Iterator[TestClient]:
    """The app over the kit's models with INLINE_PROFILE=cpu INLINE_PARALLEL=ulysses=2 (its
    worker group would start on the first split render: none runs here)."""
    config = Config(
        models_dir=wan_kit.root,
        data_dir=tmp_path / "data",
        profile="cpu",
        dtype="float32",
        parallel=str(ULYSSES_2),
    )
    with TestClient(create_app(config)) as client:
        yield client


def test_a_sequence_the_ranks_cannot_share_is_a_422_at_submit(split_client: TestClient) -> None:
    response = split_client.post("/v1/runs", json={"graph": wan_graph(**ODD), "target": "w"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["nodeId"]) == ("invalid_request", "w")
    assert "is 9 tokens for Wan 2.1 text-to-video" in error["message"]
    assert "cannot share evenly" in error["message"]
    assert split_client.get("/v1/runs").json()["runs"] == []  # nothing was queued


def test_a_sequence_that_divides_passes_the_submit_checks(wan_kit: WanKit) -> None:
    config = Config(models_dir=wan_kit.root, profile="cpu", dtype="float32", parallel="ulysses=2")
    sampler = StepLoopSampler()
    runtime = ModelRuntime(config, sampler)
    try:
        family = WanFamily(Catalog(wan_kit.root), {})
        registry = Registry()
        register_families(registry, Families([family]), family.catalog, runtime)
        runner = registry.runner(NODE_TYPE)
        assert runner is not None
        runner.check("w", {"width": 48, "height": 48, "frames": 5})  # 18 tokens: 9 a rank
        with pytest.raises(InvalidRequest, match="cannot share evenly") as refused:
            runner.check("w", ODD)
        assert refused.value.status == 422 and refused.value.node_id == "w"
    finally:
        runtime.close()
        sampler.close()


@pytest.mark.parametrize(
    ("split", "why"),
    [
        ("ulysses=4", "must divide the 2 attention heads of wan; allowed ulysses degrees: 2"),
        ("pipefusion=2", "wan cannot be split with pipefusion; supported methods: ulysses, ring"),
    ],
)
def test_a_split_the_model_cannot_run_is_refused_at_start(
    wan_kit: WanKit, split: str, why: str
) -> None:
    config = Config(models_dir=wan_kit.root, profile="cpu", dtype="float32", parallel=split)
    catalog = Catalog(wan_kit.root)
    sampler = StepLoopSampler()
    try:
        with pytest.raises(InvalidRequest, match=why):
            families = Families([WanFamily(catalog, {})])
            register_families(Registry(), families, catalog, ModelRuntime(config, sampler))
    finally:
        sampler.close()
