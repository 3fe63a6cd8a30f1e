"""Fused LoRA copies on the tiny kit (CPU profile: a placement that may fuse). A lone render's stack
runs on a fused copy from its second forward; its pixels equal the per-row render's (a server with
INLINE_NO_LORA_FUSING) and diffusers' `load_lora_weights` + `set_adapters` within the LoRA tests'
tolerance. Requests that join a fused render mid-run share its forwards per row on the shared
weights, and every request keeps the pixels it renders alone. The base weights are never written;
the runtime counts fused and per-row forwards and fuses."""

from __future__ import annotations

import gc
import hashlib
import time
import weakref
from pathlib import Path
from typing import Any

from lora_harness import Stack, picks, reference_with
from torch import nn
from zimage_harness import (
    make_runner,
    max_diff,
    pixels,
    reference_kwargs,
    render,
    take_pixels,
)

from inline_core.device.adapters import FUSE_AFTER_FORWARDS
from inline_core.diffusion.adapters.fused import FusedCopy
from inline_core.diffusion.adapters.fusing import stack_key
from inline_core.families.standalone import FamilyRig
from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.job import SampleJob
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 3  # the LoRA parity tests': float ordering may move a channel by a level or so
PARAMS: dict[str, Any] = {"width": 64, "height": 64, "steps": 4, "guidance": 0.0}
TWO: Stack = [("a", 0.8), ("b", 0.5)]


def checksum(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def transformer(runner: FamilyRig) -> nn.Module:
    model: nn.Module = runner.pipeline().denoiser.transformer
    return model


def test_a_lone_render_on_a_fused_copy_equals_per_row_and_diffusers(
    kit: KitPaths, sampler: StepLoopSampler, reference_pipe: Any, tmp_path: Path
) -> None:
    prompt = "a lighthouse at dusk"
    fusing = make_runner(kit.root, sampler)
    base = checksum(transformer(fusing))
    ours = take_pixels(render(fusing, tmp_path, prompt, loras=picks(fusing, kit, TWO), **PARAMS))
    counts = fusing.runtime.adapter_totals.to_json()
    assert counts["mode"] == "fuse-held" and counts["fuses"] == 1
    assert counts["fusedForwards"] == PARAMS["steps"] - FUSE_AFTER_FORWARDS + 1
    assert counts["perRowForwards"] == FUSE_AFTER_FORWARDS - 1
    assert checksum(transformer(fusing)) == base

    per_row = make_runner(kit.root, sampler, no_lora_fusing=True)
    rows = take_pixels(render(per_row, tmp_path, prompt, loras=picks(per_row, kit, TWO), **PARAMS))
    row_counts = per_row.runtime.adapter_totals.to_json()
    assert row_counts["mode"] == "per-row" and row_counts["fuses"] == 0
    assert row_counts["perRowForwards"] == PARAMS["steps"]
    assert max_diff(ours, rows) <= TOLERANCE
    with reference_with(reference_pipe, kit, TWO) as pipe:
        ref = pipe(prompt=prompt, **reference_kwargs(PARAMS)).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE


def test_requests_joining_a_fused_render_mid_run_keep_their_pixels(kit: KitPaths) -> None:
    """A renders alone on its fused copy; after its third step B (another stack) and C (none)
    join: those forwards are mixed and run per row on the shared weights; once they are done A
    runs on its copy again. Then D renders alone with B's stack: its copy replaces A's."""
    sampler = StepLoopSampler(phases="loop")  # a job submitted mid-run joins at the next step
    try:
        fusing = make_runner(kit.root, sampler)
        per_row = make_runner(kit.root, sampler, no_lora_fusing=True)
        base = checksum(transformer(fusing))

        def job(runner: FamilyRig, seed: int, stack: Stack, steps: int, **kw: Any) -> SampleJob:
            pipeline = runner.pipeline()
            loras = tuple(h.use for h in picks(runner, kit, stack))
            request: Any = pipeline.request(
                prompt=f"render {seed}", width=64, height=64, steps=steps, guidance=0.0,
                seed=seed, loras=loras,
            )  # fmt: skip
            return SampleJob(pipeline, request, **kw)

        none: Stack = []
        plan: dict[str, tuple[int, Stack, int]] = {
            "A": (1, [("a", 1.0)], 8),
            "B": (2, [("b", 1.0)], 3),
            "C": (3, none, 3),
        }
        alone = {
            name: pixels(sampler.run(job(per_row, seed, stack, steps)))
            for name, (seed, stack, steps) in plan.items()
        }
        joined: dict[str, Any] = {}

        def join(step: int, _count: int) -> None:
            if step == 3:
                for name in ("B", "C"):
                    seed, stack, steps = plan[name]
                    joined[name] = sampler.submit(job(fusing, seed, stack, steps))

        seed, stack, steps = plan["A"]
        together = {"A": pixels(sampler.run(job(fusing, seed, stack, steps, on_step=join)))}
        together |= {name: pixels(f.result(timeout=300)) for name, f in joined.items()}
        mid = fusing.runtime.adapter_totals.to_json()
        later = pixels(sampler.run(job(fusing, 4, plan["B"][1], 4)))
        later_alone = pixels(sampler.run(job(per_row, 4, plan["B"][1], 4)))
        end = fusing.runtime.adapter_totals.to_json()
        assert checksum(transformer(fusing)) == base
    finally:
        sampler.close()
    for name, solo in alone.items():
        assert max_diff(solo, together[name]) <= TOLERANCE, name
    assert max_diff(later, later_alone) <= TOLERANCE
    # A: 1 per-row then 2 fused forwards, 3 mixed per-row ones, then 2 fused on the same copy.
    assert (mid["fuses"], mid["fusedForwards"], mid["perRowForwards"]) == (1, 4, 4)
    # D's stack held: one per-row forward, then its own copy replaces A's.
    assert (end["fuses"], end["drops"], end["fusedForwards"]) == (2, 1, 7)


def test_an_evicted_transformer_is_freed_with_its_fused_copy(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """The transformer a render adapted per row, fused and adopted for the step cache, once the
    residency lets it go, is freed: nothing the registries keep of it holds it (nor its copy)."""
    fusing = make_runner(kit.root, sampler)
    handles = picks(fusing, kit, TWO)
    render(fusing, tmp_path, loras=handles, **PARAMS)
    assert fusing.runtime.adapter_totals.to_json()["fuses"] == 1
    residency = fusing.runtime.residency
    held = stack_key(tuple(h.use for h in handles))
    copy = residency.peek(("lora-fused", fusing.pipeline().model_key, held))
    assert isinstance(copy, FusedCopy)
    freed = [weakref.ref(transformer(fusing)), weakref.ref(copy)]
    del copy
    residency.clear()  # every entry evicted: the transformer, its VAE and encoder, the copy
    fresh = transformer(fusing)  # a new load: the stacks forget what held the evicted parts
    # The step loop's thread may not have let go of the finished job's locals yet.
    deadline = time.monotonic() + 30
    while any(ref() is not None for ref in freed) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    assert [ref() for ref in freed] == [None, None]
    assert fresh is not None
