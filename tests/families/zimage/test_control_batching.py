"""Control requests share forwards with each other and with plain requests, and render what each
renders alone: each row of the control forward gets its own control image and strength, rows of
different control models run each model on their own rows, and a plain row gets no hint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from control_harness import UNION, UNION_21, control_fields
from lora_harness import picks
from zimage_harness import make_runner, max_diff, pixels

from inline_core.families.standalone import FamilyRig
from inline_core.families.zimage.control_files import control_entry, control_use
from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 3  # a padded batch sums in another order than a lone forward
STEPS = 4


@dataclass(frozen=True)
class Case:
    control: str | None = None
    strength: float = 0.75
    shift: int = 0  # moves the control image's strokes
    width: int = 64
    lora: str | None = None


CASES = [
    Case(),
    Case(UNION, 0.8),
    Case(UNION, 0.3, shift=6),
    Case(UNION_21, 1.0),
    Case(UNION, 0.8, width=96),  # another sequence length in the same forward
    Case(lora="a"),
    Case(UNION, 0.5, shift=3, lora="b"),
    Case(),
]


def _job(rig: FamilyRig, kit: KitPaths, index: int, case: Case) -> SampleJob:
    pipeline = rig.pipeline()
    extra: dict[str, Any] = {}
    if case.control is not None:
        extra.update(control_fields(rig, case.control, case.strength, case.width, case.shift))
    if case.lora is not None:
        extra["loras"] = tuple(h.use for h in picks(rig, kit, [(case.lora, 1.0)]))
    request: Any = pipeline.request(
        prompt=f"render {index}",
        width=case.width,
        height=64,
        steps=STEPS,
        guidance=0.0,
        seed=index,
        **extra,
    )
    return SampleJob(pipeline, request)


def test_control_requests_share_forwards_and_match_alone(kit: KitPaths) -> None:
    sampler = StepLoopSampler()
    try:
        rig = make_runner(kit.root, sampler)
        alone = [pixels(sampler.run(_job(rig, kit, i, c))) for i, c in enumerate(CASES)]
        before = sampler.stats()
        futures = [sampler.submit(_job(rig, kit, i, c)) for i, c in enumerate(CASES)]
        together = [pixels(f.result(timeout=300)) for f in futures]
        after = sampler.stats()
    finally:
        sampler.close()
    assert after["batchedForwards"] > before["batchedForwards"]
    assert after["forwards"] - before["forwards"] < STEPS * len(CASES)
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        assert max_diff(solo, batched) <= TOLERANCE, f"request {i} ({CASES[i]})"
    # The controls differ per row: two strengths, two images, two models.
    assert max_diff(alone[1], alone[2]) > 10
    assert max_diff(alone[1], alone[3]) > 10


def test_a_control_model_loads_once_and_fits_the_residency(
    kit: KitPaths, sampler: StepLoopSampler
) -> None:
    """The file is read once into the resident cache; later renders at any strength find it,
    and lending it the transformer's modules never leaves them on the cached model."""
    rig = make_runner(kit.root, sampler)
    branch = rig.pipeline().denoiser.control
    sampler.run(_job(rig, kit, 1, Case(UNION, 0.8)))
    loads, resident = branch.loads, rig.runtime.residency.stats()
    sampler.run(_job(rig, kit, 2, Case(UNION, 0.1, shift=4)))
    after = rig.runtime.residency.stats()
    assert branch.loads == loads == 1 and after.loads == resident.loads
    model = branch.model(control_use(control_entry(rig.catalog, UNION, None), 1.0))
    assert getattr(model, "noise_refiner") is None  # noqa: B009 (lent only for a forward)
    own = sum(p.numel() * p.element_size() for p in model.parameters())
    assert own > 0 and after.resident_bytes >= own
