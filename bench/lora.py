"""LoRA stacks per request, at the sampler: what per-row adapters cost and what they save.

    .venv/bin/python bench/lora.py [--rounds 5] [--steps 8] [--mid-rounds 3] [--skip-mid]
        [--wan-steps 4] [--skip-wan] [--mid-only]

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
   lone render of the mid-size (~110M) transformer at 256 px, 4 steps, side by side: without a
   LoRA, with it applied per row (fused copies off), and with it on its fused copy (made once and
   kept while the stack holds the forwards, as a server keeps it); wall times as ratios to the
   render without, the share of the per-row render's forward time spent inside the adapter
   hooks (a ratio within the same forwards, so it holds on a busy machine where wall times
   drift), and what making the fused copy takes.
3. First use of a new LoRA (read, converted, checked, cached) against a cached one: the lone tiny
   render's wall time both ways, and the load alone.

Prints a table, writes bench/results/lora.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
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
    def __init__(
        self,
        models: Path,
        model: str,
        family: str = "zimage",
        *,
        sampler: Any = None,
        per_row: bool = False,
    ) -> None:
        """A family's pipeline on a runtime of its own (`per_row`: fused LoRA copies off, as
        INLINE_NO_LORA_FUSING turns them off), on its own sampler or `sampler`."""
        from inline_core.config import Config
        from inline_core.families.standalone import family_rig
        from inline_core.families.wan import WanFamily
        from inline_core.families.zimage import ZImageFamily
        from inline_core.sampling.loop import StepLoopSampler

        self.owns_sampler = sampler is None
        self.sampler = StepLoopSampler() if sampler is None else sampler
        config = Config(models_dir=models, profile="cpu", dtype="float32", no_lora_fusing=per_row)
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
        if self.owns_sampler:
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
    """A lone render of the mid-size model: no LoRA, one LoRA applied per row (fused copies off),
    and one LoRA on its fused copy (made once, kept while its stack holds the forwards), on two
    runtimes sharing one sampler (one loop thread computes), alternating per round. Each render's
    wall time, and its forwards' own seconds (the sampler's count: what a LoRA changes)."""
    from inline_core.families.zimage.kit import build_kit, build_transformer

    build_kit(root, "mid", layouts=("diffusers",), dtype="float32")
    model = build_transformer("mid")
    [path] = write_loras(root, model, zimage_modules(model), 1, 16, "bench_mid")
    from inline_core.sampling.loop import StepLoopSampler

    # Phases on the loop, as a CPU server runs them: one thread computes everything.
    shared = StepLoopSampler(phases="loop")
    rows = Rig(root, "zimage_mid_diffusers", sampler=shared, per_row=True)
    fused = Rig(root, "zimage_mid_diffusers", sampler=shared)
    lora, fused_lora = (rows.use(path),), (fused.use(path),)
    hooks = HookClock()
    forward_s: dict[str, list[float]] = {}

    def setting(name: str, rig: Rig, loras: tuple[Any, ...]) -> Callable[[], float]:
        def render() -> float:
            before = rows.sampler.stats()["forwardSeconds"]
            seconds = rig.wave([rig.job(1, 256, 4, loras, False)])
            spent = rows.sampler.stats()["forwardSeconds"] - before
            forward_s.setdefault(name, []).append(spent)
            if rig is rows and loras:
                hooks.forward += spent
            return seconds

        if rig is rows and loras:  # time the per-row hooks inside its forwards

            def hooked() -> float:
                with hooks:
                    return render()

            return hooked
        return render

    try:
        rows.wave([rows.job(1, 256, 4, lora, False)])  # warm, and the LoRA cached
        fused.wave([fused.job(1, 256, 4, fused_lora, False)])  # warm: its copy is made
        times = alternate(
            {
                PLAIN: setting(PLAIN, rows, ()),
                PER_ROW: setting(PER_ROW, rows, lora),
                FUSED: setting(FUSED, fused, fused_lora),
            },
            rounds,
        )
        # One forward at a time, the three alternating: what a LoRA adds to the forward itself,
        # away from the encodes and decodes (many short samples drift less on a busy machine).
        single = alternate(
            {
                PLAIN: one_forward(rows, ()),
                PER_ROW: one_forward(rows, lora),
                FUSED: one_forward(fused, fused_lora),
            },
            rounds * FORWARDS_PER_ROUND,
        )
        fuse_s = fuse_seconds(fused, path, rounds)
        counts = fused.rig.runtime.adapter_totals.to_json()
    finally:
        shared.close()
    walls = {name: statistics.median(t) for name, t in times.items()}
    forwards = {name: statistics.median(t) for name, t in forward_s.items()}
    one = {name: statistics.median(t) for name, t in single.items()}
    return {
        "oneForwardSeconds": one,
        "oneForwardSamples": single,
        "addedToOneForward": {
            "per row": one[PER_ROW] / one[PLAIN] - 1,
            "fused": one[FUSED] / one[PLAIN] - 1,
        },
        "seconds": walls,
        "samples": times,
        "forwardSeconds": forwards,
        "forwardSamples": forward_s,
        "addedFraction": {
            "per row": walls[PER_ROW] / walls[PLAIN] - 1,
            "fused": walls[FUSED] / walls[PLAIN] - 1,
        },
        "addedForwardFraction": {
            "per row": forwards[PER_ROW] / forwards[PLAIN] - 1,
            "fused": forwards[FUSED] / forwards[PLAIN] - 1,
        },
        "fusedOverPerRow": walls[FUSED] / walls[PER_ROW],
        "hookShareOfForward": hooks.inside / hooks.forward if hooks.forward else None,
        "fuseSeconds": fuse_s,
        "fusedRuntime": counts,
    }


PLAIN, PER_ROW, FUSED = "mid, no LoRA", "mid, 1 LoRA per row", "mid, 1 LoRA fused"
FORWARDS_PER_ROUND = 3


def one_forward(rig: Rig, loras: tuple[Any, ...]) -> Callable[[], float]:
    """One denoise forward of a prepared 256 px request, timed on the loop thread."""
    pipeline = rig.pipeline
    state = pipeline.request(
        prompt="a render", width=256, height=256, steps=4, seed=1, loras=loras, **rig.fields
    )
    rig.sampler.compute(lambda: pipeline.prepare_encode(state))

    def forward() -> float:
        start = time.perf_counter()
        pipeline.denoise_step([state])
        return time.perf_counter() - start

    return lambda: float(rig.sampler.compute(forward))


def fuse_seconds(rig: Rig, path: Path, rounds: int) -> float:
    """What making the fused copy of the LoRA at `path` on `rig`'s model takes (median)."""
    import torch

    from inline_core.diffusion.adapters.fused import fuse

    bank = rig.pipeline.denoiser.adapters
    [row] = bank.resolve([(rig.use(path),)])
    seconds: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        with torch.inference_mode():
            fuse("bench", bank.rows.modules, row)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


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


def _load(load: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.2f}" for x in load)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--mid-rounds", type=int, default=3)
    parser.add_argument("--skip-mid", action="store_true")
    parser.add_argument("--wan-steps", type=int, default=4)
    parser.add_argument("--skip-wan", action="store_true")
    parser.add_argument("--mid-only", action="store_true", help="the lone mid-size renders only")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    tiny = not args.mid_only
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="inline-lora-bench-") as tmp:
        root = Path(tmp) / "models"
        tput = throughput(root, args.rounds, args.steps) if tiny else None
        wan_on = tiny and not args.skip_wan
        wan = throughput(root, args.rounds, args.wan_steps, "wan") if wan_on else None
        first = first_use(root, args.rounds, args.steps) if tiny else None
        lone = None if args.skip_mid else lone_overhead(root, args.mid_rounds)
    rows: list[tuple[str, str]] = []
    if tput is not None:
        rows += throughput_rows("Z-Image", tput, "img/s")
    if wan is not None:
        rows += throughput_rows("Wan", wan, "videos/s")
    if first is not None:
        for name, seconds in first["renderSeconds"].items():
            rows.append((f"lone tiny render, {name}", f"{seconds * 1000:.0f} ms"))
        for name, seconds in first["loadSeconds"].items():
            rows.append((f"LoRA weights, {name}", f"{seconds * 1000:.2f} ms"))
    if lone is not None:
        for name, seconds in lone["seconds"].items():
            rows.append((f"lone render, {name}", f"{seconds:.3f} s"))
        for name, seconds in lone["forwardSeconds"].items():
            rows.append((f"its forwards, {name}", f"{seconds:.3f} s"))
        for name, seconds in lone["oneForwardSeconds"].items():
            rows.append((f"one forward, {name}", f"{seconds * 1000:.0f} ms"))
        for how, fraction in lone["addedFraction"].items():
            added = f"{fraction * 100:+.1f}% (target <= 10%)"
            rows.append((f"added by 1 LoRA {how} (mid, wall)", added))
        for how, fraction in lone["addedForwardFraction"].items():
            rows.append((f"added by 1 LoRA {how} (mid, forwards)", f"{fraction * 100:+.1f}%"))
        for how, fraction in lone["addedToOneForward"].items():
            rows.append((f"added by 1 LoRA {how} (mid, one forward)", f"{fraction * 100:+.1f}%"))
        rows.append(("fused / per row (mid, wall)", f"{lone['fusedOverPerRow']:.3f}x"))
        share = lone["hookShareOfForward"]
        if share is not None:
            rows.append(("LoRA hooks' share of its forwards (mid)", f"{share * 100:.1f}%"))
        rows.append(("making the fused copy (mid)", f"{lone['fuseSeconds'] * 1000:.0f} ms"))
    rows.append(("load average (1, 5, 15 min), start", _load(load_before)))
    rows.append(("load average (1, 5, 15 min), end", _load(os.getloadavg())))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out: dict[str, Any] = {
        "machine": platform.platform(),
        "loadAverage": {"start": load_before, "end": os.getloadavg()},
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
