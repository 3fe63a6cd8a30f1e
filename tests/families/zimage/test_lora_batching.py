"""Requests with different LoRA stacks share forwards and render what each renders alone: each
row of a batched forward gets its own stack, and no request's LoRA leaks into another's."""

from __future__ import annotations

from typing import Any

from lora_harness import Stack, picks
from zimage_harness import make_runner, max_diff, pixels

from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler
from tests.batching_helpers import run_together

TOLERANCE = 3  # a padded batch sums in another order than a lone forward

STACKS: list[Stack] = [
    [],
    [("a", 1.0)],
    [("b", 1.0)],
    [("a", 1.0), ("b", 1.0)],
    [("a", 0.5), ("b", 1.5)],
    [("a", 0.5)],
    [("b", -0.7)],
    [("a-kohya", 1.0), ("a", 0.25)],  # the same weights twice: their strengths add
]


def test_eight_requests_with_different_stacks_share_forwards_and_match_alone(
    kit: KitPaths,
) -> None:
    sampler = StepLoopSampler()
    try:
        runner = make_runner(kit.root, sampler)
        pipeline = runner.pipeline()

        def job(index: int, stack: Stack) -> SampleJob:
            loras = tuple(h.use for h in picks(runner, kit, stack))
            request: Any = pipeline.request(
                prompt=f"render {index}",
                width=64,
                height=64,
                steps=6,
                guidance=0.0,
                seed=index,
                loras=loras,
            )
            return SampleJob(pipeline, request)

        alone = [pixels(sampler.run(job(i, s))) for i, s in enumerate(STACKS)]
        before = sampler.stats()
        together = [
            pixels(out)
            for out in run_together(sampler, pipeline, [job(i, s) for i, s in enumerate(STACKS)])
        ]
        after = sampler.stats()
    finally:
        sampler.close()
    assert after["batchedForwards"] > before["batchedForwards"]
    shared = after["forwards"] - before["forwards"]
    assert shared < 6 * len(STACKS)  # fewer forwards than one per request per step
    for i, (solo, batched) in enumerate(zip(alone, together, strict=True)):
        assert max_diff(solo, batched) <= TOLERANCE, f"request {i} ({STACKS[i]})"
    # Each stack changed its picture: the rows did not all get the same adapters.
    assert max_diff(alone[0], alone[1]) > 10 and max_diff(alone[1], alone[2]) > 10
    # A and 1.25 x A through two namings are one adapter at the summed strength.
    assert max_diff(alone[7], alone[1]) > 0


def test_a_lora_for_another_model_size_fails_its_request_alone(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Any
) -> None:
    """A LoRA of the right naming but another size is refused when it loads (before it joins a
    batch), naming the file and the layer; the same pipeline renders on."""
    import pytest
    import torch

    from inline_core.diffusion.adapters.stack import LoraUse
    from inline_core.diffusion.libs import save_safetensors
    from inline_core.errors import InvalidRequest

    wrong = tmp_path / "other_size.safetensors"
    module = "transformer.layers.0.attention.to_q"
    save_safetensors(
        {
            f"{module}.lora_A.weight": torch.ones(2, 48),
            f"{module}.lora_B.weight": torch.ones(48, 2),
        },
        wrong,
    )
    runner = make_runner(kit.root, sampler)
    pipeline = runner.pipeline()
    use = LoraUse("other_size.safetensors", str(wrong), "other-size", 1.0)
    bad: Any = pipeline.request(
        prompt="x", width=64, height=64, steps=2, guidance=0.0, seed=1, loras=(use,)
    )
    with pytest.raises(
        InvalidRequest,
        match=r"other_size.safetensors adapts 'layers.0.attention.to_q' as 48 -> 48.*other model",
    ):
        sampler.run(SampleJob(pipeline, bad))
    good: Any = pipeline.request(prompt="x", width=64, height=64, steps=2, guidance=0.0, seed=1)
    assert pixels(sampler.run(SampleJob(pipeline, good))).std() > 1.0


def test_a_lora_loads_once_into_the_resident_cache_and_is_budgeted(
    kit: KitPaths, sampler: StepLoopSampler
) -> None:
    """The file is read once; later renders, at any strength, find it resident. Its bytes count
    against the one residency budget, and the base weights are never changed."""
    runner = make_runner(kit.root, sampler)
    pipeline = runner.pipeline()
    bank = pipeline.denoiser.adapters
    weights_before = {k: v.clone() for k, v in pipeline.denoiser.transformer.state_dict().items()}

    def render(strength: float) -> None:
        loras = tuple(h.use for h in picks(runner, kit, [("b", strength)]))
        request: Any = pipeline.request(
            prompt="x", width=64, height=64, steps=2, guidance=0.0, seed=3, loras=loras
        )
        sampler.run(SampleJob(pipeline, request))

    render(1.0)
    loads, resident = bank.loads, runner.runtime.residency.stats()
    render(0.3)
    render(-1.0)
    after = runner.runtime.residency.stats()
    assert bank.loads == loads and after.loads == resident.loads  # nothing read again
    lora = bank.weights(picks(runner, kit, [("b", 1.0)])[0].use)
    assert lora.nbytes > 0 and after.resident_bytes >= lora.nbytes
    for name, value in pipeline.denoiser.transformer.state_dict().items():
        assert bool((value == weights_before[name]).all()), name  # never merged
