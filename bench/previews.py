"""What step previews cost: tiny renders with previews off, latent2rgb and taesd, side by side in
one run, at 1 and 8 concurrent renders, on Z-Image or Wan.

    .venv/bin/python bench/previews.py [--family zimage|wan] [--rounds 12] [--steps 8]
                                       [--size 64] [--threads 1]

Z-Image (the default): `--size` square images, no guidance, the kit's tiny taef1 for taesd.
Wan: the kit's tiny Wan 2.1 text-to-video, `--size` x `--size` at 9 frames (3 latent frames),
guidance 3 (two rows a forward), the kit's tiny lighttaew2_1 (TAEHV) for taesd; its renders
decode their video in the round. As the server runs them: one `StepLoopSampler` and one preview
worker for the whole bench (the runtime holds one of each), the renderer at the default 512 px
preview size. Each round submits `concurrency` renders at once, once per setting, the settings
interleaved so drift hits them alike; a round ends when every render is done and its last preview
delivered (as a node waits for its last preview before it ends). "off again" is previews off a
second time: the noise floor of the comparison. Reported per setting, as ratios to "off":
- `loop/step`: the step loop's own time on previews (x0 estimates handed to the worker: the
  sampler's `previewSeconds`) over its time in forwards, per step. The rendering is the
  worker's, off the loop; this is what a preview costs a step. The budget is 3% for latent2rgb,
  15% for taesd;
- `step`: the mean forward time over off's (what the worker's thread beside the loop costs
  the forwards on this machine's cores);
- `wall`: the median round's wall time over off's (what a user waits for, the last previews
  included);
- `render/step`: the worker's median time to render one preview over off's mean forward;
- `worker`: all its rendering over the wall time: the most previews can take from the loop,
  were the worker to hold the interpreter lock the whole time it renders (each method's duty,
  `runtime.preview.PREVIEW_DUTY`, caps it: 3% latent2rgb, 10% taesd);
- how many previews were rendered or dropped (stale: a newer one came first; the worker renders
  at most a tenth of the time, so a costly method is coalesced into fewer previews).
Writes bench/results/previews.json (Z-Image) or bench/results/previews_wan.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
RESULT_FILES = {"zimage": "previews.json", "wan": "previews_wan.json"}
SETTINGS = ("off", "off again", "latent2rgb", "taesd")
CONCURRENCY = (1, 8)
BUDGET = {"latent2rgb": 0.03, "taesd": 0.15}  # the issue's: a preview's share of a tiny step


class Timed:
    """The renderer, timing each call (on the preview worker's thread)."""

    def __init__(self, renderer: Any, method: str) -> None:
        self.renderer = renderer
        self.method = method
        self.lock = threading.Lock()
        self.ms: list[float] = []

    def __call__(self, latents: Any, latent_format: str) -> Any:
        t0 = time.perf_counter()
        image = self.renderer.render(self.method, latents, latent_format)
        with self.lock:
            self.ms.append((time.perf_counter() - t0) * 1000)
        return image


def load_wan(models: Path, sampler: Any) -> Any:
    """The kit's tiny Wan 2.1 text-to-video (ComfyUI layout) over the bench's sampler."""
    from inline_core.config import Config
    from inline_core.families.standalone import family_rig
    from inline_core.families.wan import WanFamily
    from inline_core.families.wan.kit import build_kit

    build_kit(models, ["comfy"], ["t2v"])
    config = Config(models_dir=models, profile="cpu", dtype="float32")
    return family_rig(WanFamily, models, sampler, config=config).pipeline()


class Bench:
    def __init__(self, family: str, models: Path, steps: int, size: int) -> None:
        from batching_phases import load

        from inline_core.diffusion.preview.renderer import PreviewRenderer
        from inline_core.sampling import StepLoopSampler
        from inline_core.sampling.previews import PreviewWorker

        self.sampler = StepLoopSampler()
        self.family = family
        self.pipeline = load_wan(models, self.sampler) if family == "wan" else load(models)
        self.renderer = PreviewRenderer(models / "vae_approx", 512)
        self.worker = PreviewWorker()
        self.steps, self.size = steps, size

    def request(self, seed: int) -> Any:
        shape = {"width": self.size, "height": self.size, "steps": self.steps, "seed": seed}
        if self.family == "wan":
            return self.pipeline.request(
                prompt="a lighthouse", frames=9, guidance=3.0, format="png", **shape
            )
        return self.pipeline.request(prompt="a lighthouse", guidance=0.0, **shape)

    def one_round(self, concurrency: int, setting: str, seed0: int) -> dict[str, Any]:
        from inline_core.runtime.preview import preview_duty
        from inline_core.sampling import SampleJob

        method = setting if setting in BUDGET else None
        timed = None if method is None else Timed(self.renderer, method)
        jobs: list[SampleJob] = []
        for i in range(concurrency):
            job = SampleJob(self.pipeline, self.request(seed0 + i))
            if timed is not None and method is not None:
                job.preview = self.worker.channel(
                    timed, lambda image, step, count: None, duty=preview_duty(method)
                )
            jobs.append(job)
        before, counted = self.sampler.stats(), self.worker.stats()
        t0 = time.perf_counter()
        futures = [self.sampler.submit(job) for job in jobs]
        for future in futures:
            future.result()
        for job in jobs:
            if job.preview is not None:
                job.preview.flush(30.0)
        wall = (time.perf_counter() - t0) * 1000
        after, counts = self.sampler.stats(), self.worker.stats()
        forwards = after["forwards"] - before["forwards"]
        return {
            "wallMs": wall,
            "forwards": forwards,
            "forwardMs": (after["forwardSeconds"] - before["forwardSeconds"]) * 1000,
            "loopPreviewMs": (after["previewSeconds"] - before["previewSeconds"]) * 1000,
            "renderMs": [] if timed is None else timed.ms,
            "rendered": counts["rendered"] - counted["rendered"],
            "dropped": counts["dropped"] - counted["dropped"],
        }

    def close(self) -> None:
        self.sampler.close()
        self.worker.close()


def summary(runs: dict[str, list[dict[str, Any]]], concurrency: int) -> dict[str, dict[str, Any]]:
    def step_ms(rounds: list[dict[str, Any]]) -> float:
        return sum(r["forwardMs"] for r in rounds) / max(1, sum(r["forwards"] for r in rounds))

    base_wall = statistics.median(r["wallMs"] for r in runs["off"])
    base_step = step_ms(runs["off"])
    table: dict[str, dict[str, Any]] = {}
    for setting, rounds in runs.items():
        render_ms = [ms for r in rounds for ms in r["renderMs"]]
        render = statistics.median(render_ms) if render_ms else 0.0
        loop = sum(r["loopPreviewMs"] for r in rounds) / sum(r["forwardMs"] for r in rounds)
        table[f"{concurrency}x{setting}"] = {
            "concurrency": concurrency,
            "setting": setting,
            "wallMs": round(statistics.median(r["wallMs"] for r in rounds), 2),
            "wallRatio": round(statistics.median(r["wallMs"] for r in rounds) / base_wall, 3),
            "stepMs": round(step_ms(rounds), 3),
            "stepRatio": round(step_ms(rounds) / base_step, 3),
            "loopPerStep": round(loop, 5),
            # The worker's rendering over the wall time: all previews could take from the loop
            # if the worker held the interpreter lock the whole time (its duty caps it).
            "workerShare": round(sum(render_ms) / sum(r["wallMs"] for r in rounds), 4),
            "budget": BUDGET.get(setting),
            "renderMs": round(render, 3),
            "renderPerStep": round(render / base_step, 4),
            "rendered": sum(r["rendered"] for r in rounds),
            "dropped": sum(r["dropped"] for r in rounds),
        }
    return table


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", choices=sorted(RESULT_FILES), default="zimage")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--size", type=int, default=64)
    # One intra-op thread, as the other benches: on a shared 2-core machine a descheduled OpenMP
    # worker stalls every parallel region.
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(cast(int, args.threads))
    load_before = os.getloadavg()
    family = cast(str, args.family)
    models = Path(tempfile.mkdtemp(prefix="previews-")) / "models"
    bench = Bench(family, models, args.steps, args.size)
    table: dict[str, dict[str, Any]] = {}
    try:
        for setting in SETTINGS:  # warm-up (loads the tiny decoder, starts the threads)
            bench.one_round(1, setting, 0)
        for concurrency in CONCURRENCY:
            runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SETTINGS}
            for r in range(cast(int, args.rounds)):
                order = SETTINGS if r % 2 == 0 else SETTINGS[::-1]
                for setting in order:
                    runs[setting].append(bench.one_round(concurrency, setting, 100 * r))
            table.update(summary(runs, concurrency))
    finally:
        bench.close()
    load_after = os.getloadavg()
    subject = "Wan 2.1, 9 frames, guidance 3" if family == "wan" else "Z-Image"
    print(
        f"tiny {subject}, {args.size} px, {args.steps} steps, {args.rounds} rounds, "
        f"{args.threads} thread(s); load (1 min) {load_before[0]:.2f} -> {load_after[0]:.2f}"
    )
    print(
        f"{'renders':>7} {'setting':>10} {'loop/step':>9} {'worker':>6} {'budget':>6} "
        f"{'step ms':>8} "
        f"{'step/off':>8} {'wall ms':>8} {'wall/off':>8} {'render ms':>9} {'render/step':>11} "
        f"{'rendered':>8} {'dropped':>7}"
    )
    for row in table.values():
        budget = "" if row["budget"] is None else f"{row['budget']:.0%}"
        print(
            f"{row['concurrency']:>7} {row['setting']:>10} {row['loopPerStep']:>9.2%} "
            f"{row['workerShare']:>6.1%} {budget:>6} {row['stepMs']:>8.2f} "
            f"{row['stepRatio']:>8.3f} {row['wallMs']:>8.1f} "
            f"{row['wallRatio']:>8.3f} {row['renderMs']:>9.3f} {row['renderPerStep']:>11.2%} "
            f"{row['rendered']:>8} {row['dropped']:>7}"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    body: dict[str, Any] = {"family": family, "steps": args.steps, "size": args.size}
    body.update(rounds=args.rounds, threads=args.threads)
    body["load"] = {"before": load_before, "after": load_after}
    written = RESULTS / RESULT_FILES[family]
    written.write_text(json.dumps({**body, "table": table}, indent=2) + "\n")
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
