"""One Z-Image render through the server vs the same render by a bare diffusers `ZImagePipeline`.

Run by hand: `python bench/zimage_server_vs_pipeline.py [--renders 10] [--sizes tiny,mid]
[--threads N]`.

The kit's random-weight models (tiny: 64x64; mid: a ~110M-parameter transformer at 256x256), 8
steps, no guidance, CPU float32, both loaded from the same diffusers folder. In one process:
- pipeline: `ZImagePipeline.from_pretrained(folder)` and `pipe(prompt, ..., generator)` per render,
  as a user calls it; and again with `max_sequence_length` cut to the prompt's tokens ("trimmed":
  the pipeline minus its prompt padding, which the server's encoder never computes);
- server: the real app under uvicorn on loopback (in a thread), a render being `POST /v1/runs`
  (input/text -> alibaba/z-image-turbo) until the websocket's `run_done`: the PNG take written,
  fsynced and committed.
Renders alternate between the sides seed by seed, so both see the same machine load (this machine
is shared); the medians of the paired renders are compared. The first render of each side (it
loads) is reported apart, and the server's residency counters show the later ones loaded nothing.
The server's own path (HTTP, validation, the durable run, the executor, the sampler's hand-offs,
PNG encode and fsync, events) is also timed directly: a render's time minus the time spent inside
the step pipeline's calls ("path ms"), a figure the machine's noise barely touches.
Peak RSS comes from separate processes running one side each. Prints a table and writes
bench/results/zimage.json.

Targets (issue 3): the server adds at most 15 ms (median) to the tiny render and at most 5% to the
mid-size one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "zimage.json"
PROMPT = "a lighthouse on a cliff at dusk, volumetric light"
CASES: dict[str, dict[str, Any]] = {
    "tiny": {"model": "zimage_tiny_diffusers", "size": 64, "steps": 8},
    "mid": {"model": "zimage_mid_diffusers", "size": 256, "steps": 8},
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PipelineSide:
    """A bare diffusers pipeline, loaded once."""

    def __init__(self, models: Path, case: dict[str, Any], device: str, dtype: str) -> None:
        import torch
        from diffusers import ZImagePipeline  # pyright: ignore[reportPrivateImportUsage]

        self.torch = torch
        self.case = case
        started = time.perf_counter()
        pipe: Any = ZImagePipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
            str(models / "diffusion_models" / case["model"]),
            dtype=getattr(torch, dtype),
            local_files_only=True,
        )
        pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        self.pipe = pipe
        self.load_s = time.perf_counter() - started
        text = pipe.tokenizer.apply_chat_template(
            [{"role": "user", "content": PROMPT}],
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=True,
        )
        self.prompt_tokens = len(pipe.tokenizer(text).input_ids)

    def render(self, seed: int, trimmed: bool = False) -> float:
        extra: dict[str, Any] = {"max_sequence_length": self.prompt_tokens} if trimmed else {}
        t0 = time.perf_counter()
        self.pipe(
            prompt=PROMPT,
            width=self.case["size"],
            height=self.case["size"],
            num_inference_steps=self.case["steps"],
            guidance_scale=0.0,
            generator=self.torch.Generator("cpu").manual_seed(seed),
            **extra,
        )
        return (time.perf_counter() - t0) * 1000


def graph(case: dict[str, Any], seed: int) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": PROMPT}},
            {
                "id": "z",
                "type": "alibaba/z-image-turbo",
                "params": {
                    "width": case["size"],
                    "height": case["size"],
                    "steps": case["steps"],
                    "guidance": 0.0,
                    "seed": seed,
                    "model": case["model"],
                },
                "inputs": {"prompt": {"from": "p", "output": "text"}},
            },
        ],
    }


class ServerSide:
    """The real app under uvicorn on loopback, driven over HTTP and the websocket."""

    def __init__(
        self, models: Path, case: dict[str, Any], profile: str | None, dtype: str = "float32"
    ) -> None:
        import httpx
        import uvicorn

        from inline_core.config import Config
        from inline_core.families.standalone import FamilyRig
        from inline_core.server.app import create_app
        from inline_core.server.bootstrap import Services

        self.case = case
        self.port = free_port()
        data = Path(tempfile.mkdtemp(prefix="zimage-bench-"))
        # The pipeline side's dtype: like is compared with like, whatever this CPU would pick.
        config = Config(
            models_dir=models, data_dir=data, profile=profile, port=self.port, dtype=dtype
        )
        app = create_app(config)
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600)
        deadline = time.monotonic() + 120  # a server that never answers fails the bench
        while True:
            try:
                if self.client.get("/v1/health").is_success:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or not self.thread.is_alive():
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.02)
        services = cast(Services, cast(Any, app).state.services)
        assert services.runtime is not None, "the server has no model runtime"
        family = services.families.named("z-image")
        # The server's own family and runtime: what its Z-Image node renders through.
        self.runner = FamilyRig(family, services.runtime, services.catalog, config)
        self.compute_s = 0.0  # time inside the step pipeline's four calls, once instrumented
        self.overhead_ms: list[float] = []

    def instrument(self) -> None:
        """Time the pipeline's own calls, so each render splits into compute and server path."""
        sources = self.runner.sources(self.case["model"])
        # The resident one: no load.
        pipeline = self.runner.runtime.stacks().pipeline(self.runner.family, sources)
        for name in ("prepare_encode", "denoise_step", "step_scheduler", "post_decode"):
            original = getattr(pipeline, name)

            def timed(*args: Any, _call: Callable[..., Any] = original) -> Any:
                t0 = time.perf_counter()
                try:
                    return _call(*args)
                finally:
                    self.compute_s += time.perf_counter() - t0

            setattr(pipeline, name, timed)

    def render(self, seed: int) -> float:
        from websockets.sync.client import connect

        self.compute_s = 0.0
        t0 = time.perf_counter()
        response = self.client.post(
            "/v1/runs", json={"graph": graph(self.case, seed), "target": "z"}
        )
        response.raise_for_status()
        run_id = response.json()["runId"]
        with connect(f"ws://127.0.0.1:{self.port}/v1/runs/{run_id}/events") as ws:
            while True:
                event = json.loads(ws.recv())
                if event["type"] in ("run_done", "error", "cancelled"):
                    break
        elapsed = (time.perf_counter() - t0) * 1000
        if event["type"] != "run_done":
            raise RuntimeError(f"render failed: {event}")
        self.overhead_ms.append(elapsed - self.compute_s * 1000)
        return elapsed

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)


def measure_paired(
    models: Path,
    case: dict[str, Any],
    renders: int,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    profile: str | None = "cpu",
) -> dict[str, Any]:
    """Both sides in this process, renders alternating seed by seed (the order rotating)."""
    pipe = PipelineSide(models, case, device, dtype)
    server = ServerSide(models, case, profile, dtype)
    try:
        first = {"pipeline": pipe.render(0), "server": server.render(0)}
        loads_after_first = server.runner.stats()["loads"]
        server.instrument()
        server.overhead_ms.clear()
        times: dict[str, list[float]] = {"pipeline": [], "trimmed": [], "server": []}

        def trimmed(seed: int) -> float:
            return pipe.render(seed, trimmed=True)

        jobs: dict[str, Callable[[int], float]] = {
            "pipeline": pipe.render,
            "trimmed": trimmed,
            "server": server.render,
        }
        order = list(jobs)
        for seed in range(1, renders + 1):
            for name in order:
                times[name].append(jobs[name](seed))
            order = order[1:] + order[:1]
        stats = server.runner.stats()
    finally:
        server.close()
    return {
        "first": first,
        "times": times,
        "promptTokens": pipe.prompt_tokens,
        "loadsAfterFirst": loads_after_first,
        "loadsAfterAll": stats["loads"],
        "serverOverheadMs": server.overhead_ms,
    }


def side_rss(side: str, models: Path, case: dict[str, Any], profile: str | None) -> float:
    """Peak RSS of a process that loads one side and renders twice."""
    if side == "pipeline":
        pipe = PipelineSide(models, case, "cpu", "float32")
        pipe.render(0)
        pipe.render(1)
    else:
        server = ServerSide(models, case, profile)
        server.render(0)
        server.render(1)
        server.close()
    return peak_rss_mb()


def summarize(
    case: dict[str, Any], paired: dict[str, Any], rss: dict[str, float]
) -> dict[str, Any]:
    t = cast(dict[str, list[float]], paired["times"])
    p_med = statistics.median(t["pipeline"])
    t_med = statistics.median(t["trimmed"])
    s_med = statistics.median(t["server"])
    return {
        **case,
        "renders": len(t["server"]),
        "pipelineMedianMs": round(p_med, 2),
        "pipelineTrimmedMedianMs": round(t_med, 2),
        "serverMedianMs": round(s_med, 2),
        "addedMs": round(s_med - p_med, 2),
        "ratio": round(s_med / p_med, 4),
        "addedVsTrimmedMs": round(s_med - t_med, 2),
        "ratioVsTrimmed": round(s_med / t_med, 4),
        "pipelineFirstMs": round(paired["first"]["pipeline"], 1),
        "serverFirstMs": round(paired["first"]["server"], 1),
        "serverPathMedianMs": round(statistics.median(paired["serverOverheadMs"]), 2),
        "pipelinePeakRssMb": round(rss["pipeline"], 1),
        "serverPeakRssMb": round(rss["server"], 1),
        "serverLoadsAfterFirst": paired["loadsAfterFirst"],
        "serverLoadsAfterAll": paired["loadsAfterAll"],
        "promptTokens": paired["promptTokens"],
        "ms": {k: [round(x, 2) for x in v] for k, v in t.items()},
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'case':6} {'px':>5} {'pipe ms':>9} {'trimmed':>9} {'server ms':>10} {'+ms':>8} "
        f"{'ratio':>6} {'+ms trim':>9} {'vs trim':>8} {'path ms':>8} {'pipe RSS':>9} "
        f"{'srv RSS':>8} "
        f"{'loads':>7}"
    )
    for r in rows:
        cells = (
            f"{r['case']:6} {r['size']:>5} {r['pipelineMedianMs']:>9.2f}",
            f"{r['pipelineTrimmedMedianMs']:>9.2f} {r['serverMedianMs']:>10.2f}",
            f"{r['addedMs']:>8.2f} {r['ratio']:>6.3f} {r['addedVsTrimmedMs']:>9.2f}",
            f"{r['ratioVsTrimmed']:>8.3f} {r['serverPathMedianMs']:>8.2f}",
            f"{r['pipelinePeakRssMb']:>8.0f}M {r['serverPeakRssMb']:>7.0f}M",
            f"{r['serverLoadsAfterFirst']:>3}/{r['serverLoadsAfterAll']}",
        )
        print(" ".join(cells))


def build_models(root: Path, sizes: list[str]) -> Path:
    from inline_core.families.zimage.kit import build_kit

    for size in sizes:
        if not (root / "diffusion_models" / CASES[size]["model"]).exists():
            build_kit(root, size, layouts=("diffusers",))
    return root


def child(args: list[str], threads: int | None) -> str:
    """Run this script in a fresh process. Thread counts go through the environment: OpenMP reads
    them per thread at start, and `torch.set_num_threads` would not reach the server's threads."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    if threads is not None:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [sys.executable, __file__, *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"bench child {args} failed with exit status {done.returncode}")
    return done.stdout


def last_json(out: str) -> Any:
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--renders", type=int, default=10)
    parser.add_argument("--sizes", default="tiny,mid")
    parser.add_argument("--models", type=Path, default=None, help="reuse a kit folder")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (both sides)")
    parser.add_argument("--rss", choices=("pipeline", "server"), default=None)
    parser.add_argument("--paired", action="store_true", help="(internal) one size, paired")
    args = parser.parse_args()
    sizes = [s for s in str(args.sizes).split(",") if s]
    threads = cast(int | None, args.threads)
    renders = int(args.renders)
    if args.rss is not None:
        print(json.dumps(side_rss(str(args.rss), cast(Path, args.models), CASES[sizes[0]], "cpu")))
        return 0
    if args.paired:
        print(json.dumps(measure_paired(cast(Path, args.models), CASES[sizes[0]], renders)))
        return 0
    models = cast(Path | None, args.models) or Path(tempfile.mkdtemp(prefix="zimage-kit-"))
    build_models(models, sizes)
    rows: list[dict[str, Any]] = []
    for size in sizes:
        n = renders if size == "tiny" else max(3, renders // 2)
        common = ["--models", str(models), "--sizes", size, "--renders", str(n)]
        rss = {
            side: float(last_json(child([*common, "--rss", side], threads)))
            for side in ("pipeline", "server")
        }
        paired = cast(dict[str, Any], last_json(child([*common, "--paired"], threads)))
        rows.append({"case": size, **summarize(CASES[size], paired, rss)})
    print_table(rows)
    machine: dict[str, Any] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "threads": threads,
        "loadAverage": list(os.getloadavg()),
    }
    body = {"machine": machine, "targets": {"tinyAddedMs": 15, "midRatio": 1.05}, "rows": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(body, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
