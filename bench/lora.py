"""LoRA stacks per request, at the sampler: what per-row adapters cost and what they save.

    .venv/bin/python bench/lora.py [--rounds 5] [--steps 8] [--mid-rounds 3] [--skip-mid]
        [--wan-steps 4] [--skip-wan]

All on the kits' random-weight Z-Image (and Wan) models (written to a temporary folder), through
the real `StepLoopSampler` and the resident pipeline, side by side in one run, turns alternating
per round so drift on a shared machine hits every setting alike:

1. Throughput at 8 concurrent tiny renders (Z-Image at 64 px; Wan 2.1 at 48 px, 9 frames): 8
   without a LoRA; 8 with 8 different LoRAs sharing forwards (per-row deltas, this server); 8 with
   the same 8 LoRAs under one-adapter-per-batch grouping (what vLLM-Omni does: the request's stack
   joins its batch key, so requests with different stacks never share a forward). Reported as
   renders/s and as ratios, and as the denoise forwards' own seconds per wave (grouped over
   shared): a tiny Wan render's time is mostly its encode and chunked decode, which batching
   does not change, so its wall ratio says little on a busy CPU.
2. Added time of one LoRA (rank 16 on every attention, feed-forward and modulation layer) on a
   lone render of the mid-size (~110M) transformer at 256 px, 4 steps: wall time with against
   without, and the share of the LoRA render's forward time spent inside the adapter hooks (a
   ratio within the same forwards, so it holds on a busy machine where wall times drift).
3. First use of a new LoRA (read, converted, checked, cached) against a cached one: the lone tiny
   render's wall time both ways, and the load alone.

Prints a table, writes bench/results/lora.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "lora.json"
CONCURRENT = 8


def grouped_request_class(base: type[Any]) -> type[Any]:
    @dataclass(eq=False)
    class OneAdapterPerBatch(base):
        """A request whose LoRA stack is part of its batch key: one adapter set per forward."""

        @property
        def batch_key(self) -> Hashable:
            parent: Any = super()
            key: Hashable = parent.batch_key
            return (key, tuple((u.identity, u.strength) for u in self.loras))

    return OneAdapterPerBatch


def write_loras(
    out: Path, model: Any, modules: list[str], count: int, rank: int, prefix: str
) -> list[Path]:
    from inline_core.diffusion.adapters.kit import random_lora, write_lora

    return [
        write_lora(
            random_lora(model, modules, rank, seed=100 + i),
            out / "loras" / f"{prefix}_{i}.safetensors",
            "transformer.".__add__,
            down=".lora_A.weight",
            up=".lora_B.weight",
        )
        for i in range(count)
    ]


def zimage_modules(model: Any) -> list[str]:
    from inline_core.families.zimage.kit_loras import lora_a_modules, lora_b_modules

    return lora_a_modules(model) + lora_b_modules(model)


# Each family's request fields beyond the seed, size, steps and stack.
FAMILY_FIELDS: dict[str, dict[str, Any]] = {
    "zimage": {"guidance": 0.0},
    "wan": {"guidance": 1.0, "frames": 9, "format": "png"},
}


class Rig:
    def __init__(self, models: Path, model: str, family: str = "zimage") -> None:
        from inline_core.config import Config
        from inline_core.families.standalone import family_rig
        from inline_core.families.wan import WanFamily
        from inline_core.families.zimage import ZImageFamily
        from inline_core.sampling.loop import StepLoopSampler

        self.sampler = StepLoopSampler()
        config = Config(models_dir=models, profile="cpu", dtype="float32")
        kind = WanFamily if family == "wan" else ZImageFamily
        self.rig = family_rig(kind, models, self.sampler, config=config)
        self.pipeline: Any = self.rig.pipeline(model)
        self.fields = FAMILY_FIELDS[family]
        self.grouped: type[Any] | None = None

    def use(self, path: Path, strength: float = 1.0) -> Any:
        from inline_core.diffusion.adapters.stack import LoraUse

        entry = self.rig.catalog.entry("loras", path.name)
        return LoraUse(path.name, str(entry.path), entry.identity, strength)

    def job(self, seed: int, size: int, steps: int, loras: tuple[Any, ...], grouped: bool) -> Any:
        from inline_core.sampling.job import SampleJob

        fields: dict[str, Any] = {
            "prompt": f"a render {seed}",
            "width": size,
            "height": size,
            "steps": steps,
            "seed": seed,
            "loras": loras,
            **self.fields,
        }
        state = self.pipeline.request(**fields)
        if grouped:
            if self.grouped is None:
                self.grouped = grouped_request_class(cast(type[Any], type(state)))
            made = {f.name: getattr(state, f.name) for f in dataclasses.fields(state) if f.init}
            state = self.grouped(**made)
        return SampleJob(self.pipeline, state)

    def wave(self, jobs: list[Any]) -> float:
        start = time.perf_counter()
        futures = [self.sampler.submit(j) for j in jobs]
        for f in futures:
            f.result(timeout=600)
        return time.perf_counter() - start

    def close(self) -> None:
        self.sampler.close()


class HookClock:
    """Time spent inside the adapter hooks while in a `with` block (the forward time is added
    by the caller from the sampler's counters)."""

    def __init__(self) -> None:
        self.inside = 0.0
        self.forward = 0.0

    def __enter__(self) -> None:
        from inline_core.diffusion.adapters.rows import RowAdapters

        patched: Any = RowAdapters  # the bench wraps the hook body to time it
        original = RowAdapters.__dict__["_apply"]

        def restore() -> None:
            patched._apply = original

        self._restore = restore

        def timed(adapters: Any, terms: Any, x: Any, out: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(adapters, terms, x, out)
            finally:
                self.inside += time.perf_counter() - start

        patched._apply = timed

    def __exit__(self, *exc: object) -> None:
        self._restore()


def alternate(settings: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in settings}
    names = list(settings)
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            times[name].append(settings[name]())
    return times


def zimage_rig(root: Path) -> tuple[Rig, list[Path], int]:
    from inline_core.families.zimage.kit import build_kit, build_transformer

    build_kit(root, "tiny", layouts=("diffusers",))
    model = build_transformer("tiny")
    paths = write_loras(root, model, zimage_modules(model), CONCURRENT, 8, "bench_tiny")
    return Rig(root, "zimage_tiny_diffusers"), paths, 64


def wan_rig(root: Path) -> tuple[Rig, list[Path], int]:
    from inline_core.families.wan.kit import build_kit, build_parts
    from inline_core.families.wan.kit_loras import lora_a_modules

    build_kit(root, layouts=("comfy",), variants=("t2v",))
    model = build_parts("t2v")["transformer"]
    paths = write_loras(root, model, lora_a_modules(model), CONCURRENT, 8, "bench_wan")
    return Rig(root, "wan2.1_t2v_tiny_fp32.safetensors", "wan"), paths, 48


def throughput(root: Path, rounds: int, steps: int, family: str = "zimage") -> dict[str, Any]:
    rig, paths, size = (wan_rig if family == "wan" else zimage_rig)(root)
    stacks = [(rig.use(p),) for p in paths]
    try:
        rig.wave([rig.job(i, size, steps, stacks[i], False) for i in range(CONCURRENT)])  # warm

        # The denoise forwards' own seconds per wave: what batching changes, apart from the
        # encodes and decodes every setting runs alike (most of a tiny Wan render's time).
        forward_s: dict[str, list[float]] = {}

        def run(name: str, loras: bool, grouped: bool) -> tuple[str, Callable[[], float]]:
            def wave() -> float:
                start = rig.sampler.stats()["forwardSeconds"]
                jobs = [
                    rig.job(i, size, steps, stacks[i] if loras else (), grouped) for i in range(8)
                ]
                seconds = rig.wave(jobs)
                forward_s.setdefault(name, []).append(rig.sampler.stats()["forwardSeconds"] - start)
                return seconds

            return name, wave

        before = rig.sampler.stats()
        times = alternate(
            dict(
                [
                    run("no LoRA", False, False),
                    run("8 LoRAs, shared forwards", True, False),
                    run("8 LoRAs, one adapter per batch", True, True),
                ]
            ),
            rounds,
        )
        after = rig.sampler.stats()
    finally:
        rig.close()
    rates = {name: CONCURRENT / statistics.median(t) for name, t in times.items()}
    forwards = {name: statistics.median(t) for name, t in forward_s.items()}
    return {
        "imagesPerSecond": rates,
        "waveSeconds": times,
        "forwardSecondsPerWave": forwards,
        "forwardGroupedOverShared": forwards["8 LoRAs, one adapter per batch"]
        / forwards["8 LoRAs, shared forwards"],
        "sharedOverGrouped": rates["8 LoRAs, shared forwards"]
        / rates["8 LoRAs, one adapter per batch"],
        "sharedOverNoLora": rates["8 LoRAs, shared forwards"] / rates["no LoRA"],
        "forwards": after["forwards"] - before["forwards"],
        "batchedForwards": after["batchedForwards"] - before["batchedForwards"],
    }


def lone_overhead(root: Path, rounds: int) -> dict[str, Any]:
    from inline_core.families.zimage.kit import build_kit, build_transformer

    build_kit(root, "mid", layouts=("diffusers",), dtype="float32")
    model = build_transformer("mid")
    [path] = write_loras(root, model, zimage_modules(model), 1, 16, "bench_mid")
    rig = Rig(root, "zimage_mid_diffusers")
    lora = (rig.use(path),)
    hooks = HookClock()
    try:
        rig.wave([rig.job(1, 256, 4, lora, False)])  # warm, and the LoRA cached
        forwards = rig.sampler.stats()["forwardSeconds"]

        def with_lora() -> float:
            nonlocal forwards
            with hooks:
                seconds = rig.wave([rig.job(1, 256, 4, lora, False)])
            now = rig.sampler.stats()["forwardSeconds"]
            hooks.forward += now - forwards
            forwards = now
            return seconds

        def without() -> float:
            nonlocal forwards
            seconds = rig.wave([rig.job(1, 256, 4, (), False)])
            forwards = rig.sampler.stats()["forwardSeconds"]
            return seconds

        times = alternate({"mid, no LoRA": without, "mid, 1 LoRA": with_lora}, rounds)
    finally:
        rig.close()
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {
        "seconds": medians,
        "samples": times,
        "addedFraction": medians["mid, 1 LoRA"] / medians["mid, no LoRA"] - 1,
        "hookShareOfForward": hooks.inside / hooks.forward if hooks.forward else None,
    }


def first_use(root: Path, rounds: int, steps: int) -> dict[str, Any]:
    from inline_core.families.zimage.kit import build_transformer

    model = build_transformer("tiny")
    modules = zimage_modules(model)
    fresh = write_loras(root, model, modules, rounds, 8, "bench_fresh")
    [cached] = write_loras(root, model, modules, 1, 8, "bench_cached")
    rig = Rig(root, "zimage_tiny_diffusers")
    bank = rig.pipeline.denoiser.adapters
    try:
        rig.wave([rig.job(0, 64, steps, (rig.use(cached),), False)])
        new_render: list[float] = []
        cached_render: list[float] = []
        for i in range(rounds):
            new_render.append(rig.wave([rig.job(i, 64, steps, (rig.use(fresh[i]),), False)]))
            cached_render.append(rig.wave([rig.job(i, 64, steps, (rig.use(cached),), False)]))
        more = write_loras(root, model, modules, rounds, 8, "bench_load")
        loads: list[float] = []
        hits: list[float] = []
        for path in more:
            use = rig.use(path)
            start = time.perf_counter()
            bank.weights(use)
            loads.append(time.perf_counter() - start)
            start = time.perf_counter()
            bank.weights(use)
            hits.append(time.perf_counter() - start)
    finally:
        rig.close()
    return {
        "renderSeconds": {
            "new LoRA": statistics.median(new_render),
            "cached LoRA": statistics.median(cached_render),
        },
        "loadSeconds": {"first use": statistics.median(loads), "cached": statistics.median(hits)},
    }


def throughput_rows(title: str, tput: dict[str, Any], unit: str) -> list[tuple[str, str]]:
    rows = [
        (f"{title}: {name}", f"{rate:.2f} {unit}") for name, rate in tput["imagesPerSecond"].items()
    ]
    shared = f"{tput['sharedOverGrouped']:.2f}x (target >= 1.5x)"
    rows += [
        (f"{title}: shared / one-adapter-per-batch", shared),
        (f"{title}: shared LoRAs / no LoRA", f"{tput['sharedOverNoLora']:.2f}x"),
        (
            f"{title}: forward time, grouped / shared",
            f"{tput['forwardGroupedOverShared']:.2f}x",
        ),
        (f"{title}: forwards (batched)", f"{tput['forwards']} ({tput['batchedForwards']})"),
    ]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--mid-rounds", type=int, default=3)
    parser.add_argument("--skip-mid", action="store_true")
    parser.add_argument("--wan-steps", type=int, default=4)
    parser.add_argument("--skip-wan", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="inline-lora-bench-") as tmp:
        root = Path(tmp) / "models"
        tput = throughput(root, args.rounds, args.steps)
        wan = None if args.skip_wan else throughput(root, args.rounds, args.wan_steps, "wan")
        first = first_use(root, args.rounds, args.steps)
        lone = None if args.skip_mid else lone_overhead(root, args.mid_rounds)
    rows = throughput_rows("Z-Image", tput, "img/s")
    if wan is not None:
        rows += throughput_rows("Wan", wan, "videos/s")
    for name, seconds in first["renderSeconds"].items():
        rows.append((f"lone tiny render, {name}", f"{seconds * 1000:.0f} ms"))
    for name, seconds in first["loadSeconds"].items():
        rows.append((f"LoRA weights, {name}", f"{seconds * 1000:.2f} ms"))
    if lone is not None:
        for name, seconds in lone["seconds"].items():
            rows.append((f"lone render, {name}", f"{seconds:.3f} s"))
        added = f"{lone['addedFraction'] * 100:+.1f}% (target <= 10%)"
        rows.append(("added by 1 LoRA (mid, wall)", added))
        share = lone["hookShareOfForward"]
        if share is not None:
            rows.append(("LoRA hooks' share of its forwards (mid)", f"{share * 100:.1f}%"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out: dict[str, Any] = {
        "machine": platform.platform(),
        "rounds": args.rounds,
        "steps": args.steps,
        "throughput8": tput,
        "wanThroughput8": wan,
        "firstUse": first,
        "loneMid": lone,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
