"""Residency (no reload on a second render), progress, cancel, take params, registration."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from PIL import Image
from zimage_harness import make_runner, render, take_pixels

from inline_core.config import Config
from inline_core.contract.registry import Families
from inline_core.diffusion.residency import Footprint, ResidentCache
from inline_core.engine.runtime import ModelRuntime
from inline_core.errors import Cancelled, InvalidRequest
from inline_core.families.flux2.family import Flux2Family
from inline_core.families.nodes.register import PRIMITIVE_TYPES, register_families
from inline_core.families.zimage import NODE_TYPE, ZImageFamily
from inline_core.families.zimage.kit import KitPaths
from inline_core.graph.registry import Registry
from inline_core.models.catalog import Catalog
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.progress import Progress, RunEvent
from inline_core.sampling.loop import StepLoopSampler

COMPONENTS = 5  # transformer, text encoder, VAE, tokenizer, scheduler config


def test_second_render_loads_nothing_and_img2img_shares_the_stack(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    runner = make_runner(kit.root, sampler)
    first = render(runner, tmp_path, "first")
    assert runner.stats()["loads"] == COMPONENTS
    render(runner, tmp_path, "second", seed=99, guidance=2.0)
    assert isinstance(first.outputs["image"], Image.Image)
    render(runner, tmp_path, "third", image=first.outputs["image"], strength=0.5)
    stats = runner.stats()
    assert stats["loads"] == COMPONENTS and stats["hits"] == 2 * COMPONENTS
    assert stats["evictions"] == 0


@contextmanager
def text_encoder_forwards() -> Generator[list[int]]:
    """Counts the text encoder's forwards (Qwen3Model's own, not its layers')."""
    calls: list[int] = []

    def hook(module: torch.nn.Module, _args: Any, _out: Any) -> None:
        if type(module).__name__ == "Qwen3Model":
            calls.append(1)

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield calls
    finally:
        handle.remove()


def test_a_seed_only_change_reuses_the_prompt_encoding_and_its_pixels_match_a_fresh_render(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    runner = make_runner(kit.root, sampler)
    with text_encoder_forwards() as first:
        render(runner, tmp_path, seed=1)
    with text_encoder_forwards() as seed_change:
        reused = render(runner, tmp_path, seed=2)
    with text_encoder_forwards() as prompt_change:
        render(runner, tmp_path, "a grey wolf in the rain", seed=2)
    assert len(first) == 1 and len(seed_change) == 0 and len(prompt_change) == 1
    alone = render(make_runner(kit.root, sampler), tmp_path, seed=2)
    assert np.array_equal(take_pixels(reused), take_pixels(alone))


def test_float32_files_computed_in_float32_are_mapped_and_cost_no_budget(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    runner = make_runner(kit.root, sampler)
    render(runner, tmp_path)
    stats = runner.stats()
    assert stats["mappedBytes"] > 0 and stats["residentBytes"] < stats["mappedBytes"] / 10


def test_a_render_larger_than_the_budget_keeps_its_parts_and_never_reloads(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # bfloat16 from float32 files: copies of their own, every one larger than the budget.
    runner = make_runner(kit.root, sampler, dtype="bfloat16")
    runner.runtime.residency.budget_bytes = 1
    with caplog.at_level("WARNING", logger="inline_core.diffusion.residency"):
        render(runner, tmp_path, "a fox", seed=1)
        render(runner, tmp_path, "a fox", seed=2)  # a seed change
        render(runner, tmp_path, "a heron", seed=2)  # a prompt change
    stats = runner.stats()
    assert (stats["loads"], stats["reloads"], stats["evictions"]) == (COMPONENTS, 0, 0)
    assert stats["overBudget"] and stats["residentBytes"] > 1
    [warning] = [r.getMessage() for r in caplog.records if "budget" in r.getMessage()]
    assert "stay resident together rather than being reloaded" in warning


def test_renders_in_progress_keep_each_others_parts_and_an_ended_one_gives_them_up(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    # Transformers (the kit's, and the same file under other names: other components),
    # computed in bfloat16 from float32 files, so every part is a copy over the 1-byte budget.
    assert kit.diffusion_file is not None
    models = tmp_path / "models"
    shutil.copytree(kit.root, models)
    second = models / "diffusion_models" / "second.safetensors"
    third = models / "diffusion_models" / "third.safetensors"
    shutil.copy(kit.diffusion_file, second)
    shutil.copy(kit.diffusion_file, third)
    runner = make_runner(models, sampler, dtype="bfloat16")
    runtime, family = runner.runtime, runner.family
    runtime.residency.budget_bytes = 1
    stacks = runtime.stacks()
    with runtime.rendering("first run"):
        stacks.pipeline(family, runner.sources(kit.diffusion_file.name), render="first run")
        with runtime.rendering("second run"):
            stacks.pipeline(family, runner.sources(second.name), render="second run")
        # The second run's loads evicted nothing the first, still in progress, holds.
        assert runner.stats()["evictions"] == 0
        stacks.pipeline(family, runner.sources(kit.diffusion_file.name), render="first run")
        assert runner.stats()["reloads"] == 0
    # Both ended: a third transformer's load may now evict what they held.
    with runtime.rendering("third run"):
        stacks.pipeline(family, runner.sources(third.name), render="third run")
    assert runner.stats()["evictions"] > 0 and runtime.renders_in_progress() == frozenset()


def test_resident_cache_lru_order_and_single_loader() -> None:
    cache = ResidentCache(budget_bytes=100)
    cache.get("a", lambda: ("A", Footprint(40)))
    cache.get("b", lambda: ("B", Footprint(30)))
    assert cache.get("a", lambda: ("A2", Footprint(40))) == "A"  # a hit, and most recent now
    cache.get("c", lambda: ("C", Footprint(40)))  # 110 > 100: evicts b, the least recently used
    assert cache.peek("b") is None and cache.peek("a") == "A" and cache.peek("c") == "C"
    calls: list[int] = []
    gate = threading.Event()

    def slow() -> tuple[str, Footprint]:
        calls.append(1)
        gate.wait(2)
        return "D", Footprint(1)

    threads = [threading.Thread(target=cache.get, args=("d", slow)) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    gate.set()
    for t in threads:
        t.join()
    assert calls == [1]  # concurrent requests for one key load it once
    stats = cache.stats()
    assert (stats.loads, stats.evictions, stats.resident) == (4, 1, 3)


def test_resident_cache_keeps_a_renders_parts_and_counts_reloads_and_mapped_pages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = ResidentCache(budget_bytes=100)
    cache.get("other", lambda: ("O", Footprint(60)))
    assert not cache.stats().mapped_over_budget
    with caplog.at_level("WARNING", logger="inline_core.diffusion.residency"):
        cache.get("te", lambda: ("T", Footprint(60, mapped_bytes=500)))  # evicts "other"
    assert cache.stats().mapped_over_budget  # 560 > 100: the OS pages the mapped weights in
    [paged] = [r.getMessage() for r in caplog.records]
    assert "reads mapped weights back from disk" in paged
    # The same render's transformer: "te" is kept, so the cache goes over budget.
    cache.get("transformer", lambda: ("X", Footprint(60)), keep={"te"})
    stats = cache.stats()
    assert cache.peek("te") == "T" and stats.over_budget and stats.resident_bytes == 120
    assert stats.mapped_bytes == 500 and stats.evictions == 1
    cache.get("other", lambda: ("O", Footprint(60)))  # another render: evicts both of the first
    stats = cache.stats()
    assert (stats.loads, stats.reloads, stats.resident) == (4, 1, 1)


def test_progress_phases_and_take_params(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    events: list[RunEvent] = []
    runner = make_runner(kit.root, sampler)
    result = render(runner, tmp_path, on_event=events.append, steps=3, seed=1234)
    progress = [e for e in events if isinstance(e, Progress)]
    phases = [e.phase for e in progress]
    order = ["loading", "encode", "sample", "decode", "save"]
    assert [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p] == order
    steps = [e for e in progress if e.step is not None]
    assert [e.step for e in steps] == [1, 2, 3] and all(e.step_count == 3 for e in steps)
    assert all(e.eta_ms is not None for e in steps) and steps[-1].eta_ms == 0
    fractions = [e.fraction for e in progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    (take,) = result.takes
    assert take.params["seed"] == 1234 and take.params["model"] == "zimage_tiny.safetensors"
    with Image.open(take.path) as png:
        assert png.format == "PNG" and png.size == (64, 64)
        text = cast(dict[str, str], getattr(png, "text"))  # noqa: B009 (PNG-only attribute)
        assert '"seed": 1234' in text["inline:params"]


def test_cancel_stops_within_one_step(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    runner = make_runner(kit.root, sampler)
    cancel = CancelToken()
    seen: list[int] = []

    def on_event(event: RunEvent) -> None:
        if isinstance(event, Progress) and event.step is not None:
            seen.append(event.step)
            if event.step == 2:
                cancel.cancel("stop")

    with pytest.raises(Cancelled):
        render(runner, tmp_path, cancel=cancel, on_event=on_event, steps=20)
    assert seen and max(seen) <= 3
    assert not list(tmp_path.glob("*.png"))  # no take for a cancelled render


def register(catalog: Catalog, config: Config, sampler: StepLoopSampler) -> Registry:
    """The installed families registered as the server registers them."""
    registry = Registry()
    families = Families.discovered(catalog, config.env)
    register_families(registry, families, catalog, ModelRuntime(config, sampler))
    return registry


def test_the_built_in_family_is_found_through_its_entry_point(tmp_path: Path) -> None:
    families = Families.discovered(Catalog(tmp_path), {})
    assert isinstance(families.named("z-image"), ZImageFamily)
    [listed] = [f for f in families.describe() if f["name"] == "z-image"]
    assert listed["available"] is True and listed["primitives"] is True


def test_registration_is_torch_free() -> None:
    code = (
        "import sys, pathlib;"
        "from inline_core.config import Config;"
        "from inline_core.engine.runtime import ModelRuntime;"
        "from inline_core.families.nodes.register import register_families;"
        "from inline_core.contract.registry import Families;"
        "from inline_core.graph.registry import Registry;"
        "from inline_core.models.catalog import Catalog;"
        "from inline_core.sampling.loop import StepLoopSampler;"
        "catalog = Catalog(pathlib.Path('.')); r = Registry();"
        "runtime = ModelRuntime(Config(), StepLoopSampler());"
        "register_families(r, Families.discovered(catalog, {}), catalog, runtime);"
        "assert r.runner('alibaba/z-image-turbo') is not None;"
        "assert r.runner('sample') is not None;"
        "heavy = [m for m in ('torch', 'diffusers', 'transformers') if m in sys.modules];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_missing_runtime_marks_the_node_unavailable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sampler: StepLoopSampler
) -> None:
    missing = ("torch", "inline_core_not_installed_mod")
    monkeypatch.setattr(ZImageFamily, "requires", missing)
    registry = register(Catalog(tmp_path), Config(models_dir=tmp_path), sampler)
    # FLUX.2 serves the primitives too: they stay available through it.
    assert registry.descriptor(NODE_TYPE).unavailable_reason is not None
    assert all(registry.runner(t) is not None for t in PRIMITIVE_TYPES)
    monkeypatch.setattr(Flux2Family, "requires", missing)  # now no family serves them
    registry = register(Catalog(tmp_path), Config(models_dir=tmp_path), sampler)
    for node_type in (NODE_TYPE, *PRIMITIVE_TYPES):
        descriptor = registry.descriptor(node_type)
        assert descriptor.unavailable_reason is not None
        assert "pip install 'inline-core[diffusers]'" in descriptor.unavailable_reason
        assert "inline_core_not_installed_mod" in descriptor.unavailable_reason
        assert registry.runner(node_type) is None


def test_sizes_must_fit_the_patch_grid(kit: KitPaths, sampler: StepLoopSampler) -> None:
    runner = make_runner(kit.root, sampler)
    pipeline = runner.pipeline()
    with pytest.raises(InvalidRequest, match="multiples of 16"):
        pipeline.request(prompt="x", width=72, height=64, steps=2, guidance=0.0, seed=1)
    with pytest.raises(InvalidRequest, match="no step"):
        pipeline.request(
            prompt="x",
            width=64,
            height=64,
            steps=2,
            guidance=0.0,
            seed=1,
            image=Image.fromarray(np.zeros((64, 64, 3), np.uint8)),
            strength=0.0,
        )
