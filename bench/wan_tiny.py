"""Tiny Wan renders through the server vs the same renders by bare diffusers pipelines.

Run by hand: `python bench/wan_tiny.py [--renders 8] [--threads N]`.

The kit's random-weight Wan models (`inline-core kit --family wan`), 9 frames, 4 steps, guidance
4 (CFG on), CPU float32, each side loaded from the same diffusers folder, in one process. Rows:
- `wan2.1-t2v`: Wan 2.1 text-to-video at 48x32 against `WanPipeline`;
- `wan2.2-ti2v-t2v`: the TI2V stack's text-to-video at 64x32 against `WanPipeline`
  (`expand_timesteps`);
- `wan2.2-ti2v-i2v`: its image-to-video from a 50x40 image against `WanImageToVideoPipeline`
  (its prompts encoded by `WanPipeline.encode_prompt` inside the timed call: the i2v pipeline's
  own prompt cleaning needs `ftfy`, not installed here);
- `wan2.2-a14b-t2v`: the tiny A14B pair at 48x32 against `WanPipeline(transformer,
  transformer_2, boundary_ratio)` (shift 12: of the 4 steps, 3 on the high-noise expert).

Sides:
- pipeline: `from_pretrained(folder)` and `pipe(...)` per render, output as numpy frames (no file
  written);
- server: the real server in its own process on loopback, a render being `POST /v1/runs`
  (input/text [+ input/image] -> alibaba/wan, format png: a lossless APNG take) until the
  websocket's `run_done`: the take encoded, fsynced and committed, each decoded chunk streamed.
Renders alternate between the sides seed by seed, so both see the same machine load; the medians
are compared as a ratio. The first render of each side (it loads) is reported apart. Prints a
table and writes bench/results/wan_tiny.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "wan_tiny.json"
PROMPT = "a paper boat drifting down a rainy street"
RENDER: dict[str, Any] = {"frames": 9, "steps": 4, "guidance": 4.0}


@dataclass(frozen=True)
class Case:
    name: str
    model: str  # the kit's diffusers folder
    width: int
    height: int
    image: bool = False  # image-to-video from IMAGE_SIZE
    frames: int = RENDER["frames"]
    steps: int = RENDER["steps"]
    guidance: float = RENDER["guidance"]
    format: str = "png"  # the server's take: a lossless APNG (or "mp4")

    @property
    def render(self) -> dict[str, Any]:
        size = {"width": self.width, "height": self.height}
        return {**size, "frames": self.frames, "steps": self.steps, "guidance": self.guidance}


CASES = (
    Case("wan2.1-t2v", "wan2.1_t2v_tiny_diffusers", 48, 32),
    Case("wan2.2-ti2v-t2v", "wan2.2_ti2v_tiny_diffusers", 64, 32),
    Case("wan2.2-ti2v-i2v", "wan2.2_ti2v_tiny_diffusers", 64, 32, image=True),
    Case("wan2.2-a14b-t2v", "wan2.2_t2v_a14b_tiny_diffusers", 48, 32),
)
IMAGE_SIZE = (50, 40)


def first_frame_png() -> bytes:
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (IMAGE_SIZE[1], IMAGE_SIZE[0], 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BarePipeline:
    def __init__(
        self, models: Path, case: Case, device: str = "cpu", dtype: str = "float32"
    ) -> None:
        import io

        import torch
        from diffusers import (
            WanImageToVideoPipeline,  # pyright: ignore[reportPrivateImportUsage]
            WanPipeline,  # pyright: ignore[reportPrivateImportUsage]
        )
        from PIL import Image

        self.torch, self.case = torch, case
        started = time.perf_counter()
        pipe: Any = WanPipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
            str(models / "diffusion_models" / case.model),
            dtype=getattr(torch, dtype),
            local_files_only=True,
        )
        pipe.set_progress_bar_config(disable=True)
        pipe.to(device)
        self.encoder, self.pipe = pipe, pipe
        self.image: Any = None
        if case.image:
            names = ("tokenizer", "text_encoder", "vae", "scheduler", "transformer")
            parts = {name: getattr(pipe, name) for name in names}
            i2v: Any = WanImageToVideoPipeline(**parts, expand_timesteps=True)
            i2v.set_progress_bar_config(disable=True)
            self.pipe = i2v
            self.image = Image.open(io.BytesIO(first_frame_png())).convert("RGB")
        self.load_s = time.perf_counter() - started

    def render(self, seed: int) -> float:
        render = self.case.render
        t0 = time.perf_counter()
        kwargs: dict[str, Any] = {}
        if self.image is None:
            kwargs["prompt"] = PROMPT
        else:
            positive, negative = self.encoder.encode_prompt(
                PROMPT, None, do_classifier_free_guidance=True, max_sequence_length=512
            )
            kwargs.update(image=self.image, prompt_embeds=positive, negative_prompt_embeds=negative)
        self.pipe(
            **kwargs,
            width=render["width"],
            height=render["height"],
            num_frames=render["frames"],
            num_inference_steps=render["steps"],
            guidance_scale=render["guidance"],
            generator=self.torch.Generator("cpu").manual_seed(seed),
            output_type="np",
        )
        return (time.perf_counter() - t0) * 1000


class Server:
    """The real server in its own process (`python -m inline_core.server`, as a user starts it),
    on loopback, driven over HTTP and the websocket. Its own process, not a thread here: a CPU
    server does its model work on one thread (diffusion/threads.py), and a bare pipeline
    computing beside it in one process would throttle both."""

    def __init__(self, models: Path, dtype: str = "float32", profile: str | None = "cpu") -> None:
        import httpx

        self.port = loopback_port()
        self.data = Path(tempfile.mkdtemp(prefix="wan-bench-"))
        env = {
            **os.environ,
            "INLINE_MODELS_DIR": str(models),
            "INLINE_DATA_DIR": str(self.data),
            "INLINE_PORT": str(self.port),
            "INLINE_DTYPE": dtype,
            "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
            **({"INLINE_PROFILE": profile} if profile else {}),
        }
        self.log = (self.data / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "inline_core.server"], env=env, stdout=self.log, stderr=self.log
        )
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600)
        deadline = time.monotonic() + 120  # a server that never answers fails the bench
        while True:
            try:
                if self.client.get("/v1/health").is_success:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    tail = (self.data / "server.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"the server did not start:\n{tail}") from None
                time.sleep(0.05)

        uploaded = self.client.post(
            "/v1/assets", content=first_frame_png(), headers={"content-type": "image/png"}
        )
        uploaded.raise_for_status()
        self.image_asset = str(uploaded.json()["id"])

    def graph(self, case: Case, seed: int) -> dict[str, Any]:
        """input/text [+ input/image] -> `w`, an alibaba/wan node rendering the case."""
        node: dict[str, Any] = {
            "id": "w",
            "type": "alibaba/wan",
            "params": {**case.render, "seed": seed, "model": case.model, "format": case.format},
            "inputs": {"prompt": {"from": "p", "output": "text"}},
        }
        nodes: list[dict[str, Any]] = [
            {"id": "p", "type": "input/text", "params": {"text": PROMPT}}
        ]
        if case.image:
            asset = {"ref": "asset", "id": self.image_asset}
            nodes.append({"id": "i", "type": "input/image", "params": {"asset": asset}})
            node["inputs"]["image"] = {"from": "i", "output": "image"}
        return {"schemaVersion": 1, "nodes": [*nodes, node]}

    def submit(self, case: Case, seed: int) -> str:
        body = {"graph": self.graph(case, seed), "target": "w"}
        response = self.client.post("/v1/runs", json=body)
        response.raise_for_status()
        return str(response.json()["runId"])

    def render(self, case: Case, seed: int) -> float:
        from websockets.sync.client import connect

        t0 = time.perf_counter()
        run_id = self.submit(case, seed)
        with connect(f"ws://127.0.0.1:{self.port}/v1/runs/{run_id}/events") as ws:
            while (event := json.loads(ws.recv()))["type"] not in ("run_done", "error"):
                pass
        if event["type"] != "run_done":
            raise RuntimeError(f"render failed: {event}")
        return (time.perf_counter() - t0) * 1000

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()
        shutil.rmtree(self.data, ignore_errors=True)


def bench_case(case: Case, models: Path, server: Server, renders: int, **on: str) -> dict[str, Any]:
    """Paired renders of one case; `on` places the bare pipeline (`device`, `dtype`)."""
    pipe = BarePipeline(models, case, **on)
    first = {"pipeline": pipe.render(0), "server": server.render(case, 0)}
    times: dict[str, list[float]] = {"pipeline": [], "server": []}

    def server_render(seed: int) -> float:
        return server.render(case, seed)

    for seed in range(1, renders + 1):
        sides = [("pipeline", pipe.render), ("server", server_render)]
        for name, render in sides if seed % 2 else sides[::-1]:
            times[name].append(render(seed))
    p_med, s_med = statistics.median(times["pipeline"]), statistics.median(times["server"])
    return {
        "case": case.name,
        **case.render,
        "image": case.image,
        "renders": len(times["server"]),
        "pipelineMedianMs": round(p_med, 2),
        "serverMedianMs": round(s_med, 2),
        "addedMs": round(s_med - p_med, 2),
        "ratio": round(s_med / p_med, 4),
        "firstMs": {k: round(v, 1) for k, v in first.items()},
        "ms": {k: [round(x, 2) for x in v] for k, v in times.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--renders", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--case", action="append", choices=[c.name for c in CASES], help="only these rows"
    )
    args = parser.parse_args()
    if args.threads is not None:
        import torch

        torch.set_num_threads(int(args.threads))
    from inline_core.families.wan.kit import build_kit

    models = Path(tempfile.mkdtemp(prefix="wan-kit-"))
    build_kit(models, layouts=("diffusers",))
    cases = [c for c in CASES if not args.case or c.name in args.case]
    server = Server(models)
    try:
        rows = [bench_case(case, models, server, int(args.renders)) for case in cases]
    finally:
        server.close()
    print(f"{'case':<16} {'pipe ms':>9} {'server ms':>10} {'+ms':>8} {'ratio':>6}")
    for row in rows:
        p_med, s_med = row["pipelineMedianMs"], row["serverMedianMs"]
        print(f"{row['case']:<16} {p_med:>9.2f} {s_med:>10.2f} {s_med - p_med:>8.2f} "
              f"{row['ratio']:>6.3f}")  # fmt: skip
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "threads": args.threads,
        "loadAverage": list(os.getloadavg()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
