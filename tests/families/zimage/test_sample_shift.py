"""A request's own flow shift on Z-Image (ComfyUI's ModelSamplingSD3 / AuraFlow / Flux): an
imported ModelSamplingSD3 renders what `sample` renders with the same shift set by hand, and
requests at different shifts share forwards and render what each renders alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from comfy_zimage import zimage_api
from primitive_graphs import Json, Rig, make_rig, take_pixels
from zimage_harness import make_runner, max_diff, pixels

from inline_core.contract.registry import Families
from inline_core.errors import InvalidRequest
from inline_core.families.zimage.kit import KitPaths
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import validate_graph
from inline_core.importer.comfy import import_comfy
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import run_together
from tests.importer.comfy_workflows import with_model_sampling

TOLERANCE = 3  # a padded batch sums in another order than a lone forward


@pytest.fixture
def rig(kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path) -> Rig:
    return make_rig(kit.root, sampler, tmp_path)


def imported(rig: Rig, workflow: Json) -> Json:
    facts = Families([rig.runner.family])
    body = import_comfy(workflow, rig.catalog, registry=rig.registry, facts=facts).to_json()
    assert body["changesPicture"] == [], body["changesPicture"]
    return body


def sample_node(graph: Json) -> Json:
    return next(n for n in graph["nodes"] if n["type"] == "sample")


def with_sd3_shift(shift: float) -> Json:
    return with_model_sampling(
        zimage_api("a fox", seed=5, steps=4), "ModelSamplingSD3", shift=shift
    )


def test_an_imported_sd3_shift_renders_the_native_shift(rig: Rig) -> None:
    own = imported(rig, zimage_api("a fox", seed=5, steps=4))  # AuraFlow 3: the model's own
    assert "shift" not in sample_node(own["graph"])["params"]
    [default] = rig.run(own["graph"], own["target"])[0].takes
    native = own["graph"]
    sample_node(native)["params"]["shift"] = 7.0  # the same graph, the shift set by hand
    [by_hand] = rig.run(native, own["target"])[0].takes
    sd3 = imported(rig, with_sd3_shift(7.0))
    assert sample_node(sd3["graph"])["params"]["shift"] == 7.0
    [from_comfy] = rig.run(sd3["graph"], sd3["target"])[0].takes
    assert max_diff(take_pixels(from_comfy), take_pixels(by_hand)) == 0
    assert max_diff(take_pixels(by_hand), take_pixels(default)) > 0  # the shift is honoured
    assert from_comfy.params["shift"] == 7.0  # the take says how it was sampled


def test_an_imported_flux_shift_renders_its_mu(rig: Rig) -> None:
    workflow = with_model_sampling(
        zimage_api("a fox", seed=5, steps=4),
        "ModelSamplingFlux",
        max_shift=2.0,
        base_shift=0.5,
        width=1024,
        height=1024,
    )
    flux = imported(rig, workflow)
    mu = sample_node(flux["graph"])["params"]["mu"]
    assert mu == pytest.approx(2.0)  # 4096 tokens: max_shift, as ComfyUI's line gives
    [from_comfy] = rig.run(flux["graph"], flux["target"])[0].takes
    native = imported(rig, zimage_api("a fox", seed=5, steps=4))["graph"]
    sample_node(native)["params"]["mu"] = mu
    [by_hand] = rig.run(native, flux["target"])[0].takes
    assert max_diff(take_pixels(from_comfy), take_pixels(by_hand)) == 0


def test_a_shift_and_a_mu_together_are_refused_at_submit(rig: Rig) -> None:
    own = imported(rig, zimage_api("a fox", seed=5, steps=4))
    sample_node(own["graph"])["params"].update(shift=3.0, mu=1.0)
    with pytest.raises(InvalidRequest, match="two shifts of one schedule"):  # at submit
        validate_graph(parse_graph(own["graph"]), own["target"], rig.registry, rig.catalog)


SHIFTS: list[dict[str, float]] = [{}, {"shift": 1.0}, {"shift": 6.0}, {"mu": 0.8}, {"mu": 2.2}]


def test_requests_at_different_shifts_share_forwards_and_match_alone(kit: KitPaths) -> None:
    sampler = StepLoopSampler()
    try:
        pipeline = make_runner(kit.root, sampler).pipeline()

        def job(shift: dict[str, float]) -> SampleJob:
            request: Any = pipeline.request(
                prompt="a fox", width=64, height=64, steps=4, guidance=0.0, seed=3, **shift
            )
            return SampleJob(pipeline, request)

        alone = [pixels(sampler.run(job(s))) for s in SHIFTS]
        before = sampler.stats()
        together = [
            pixels(out) for out in run_together(sampler, pipeline, [job(s) for s in SHIFTS])
        ]
        after = sampler.stats()
    finally:
        sampler.close()
    assert after["batchedForwards"] > before["batchedForwards"]
    for shift, solo, batched in zip(SHIFTS, alone, together, strict=True):
        assert max_diff(solo, batched) <= TOLERANCE, shift
    for i in range(1, len(SHIFTS)):  # each shift renders a picture of its own
        assert max_diff(alone[0], alone[i]) > 0, SHIFTS[i]
