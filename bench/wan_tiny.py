"""One tiny Wan 2.1 render through the server vs the same render by a bare diffusers `WanPipeline`.

Run by hand: `python bench/wan_tiny.py [--renders 8] [--threads N]`.

The kit's random-weight Wan (`inline-core kit --family wan`), 48x32 px, 9 frames, 4 steps,
guidance 4 (CFG on), CPU float32, both loaded from the same diffusers folder, in one process:
- pipeline: `WanPipeline.from_pretrained(folder)` and `pipe(prompt, ..., generator)` per render,
  output as numpy frames (no file written);
- server: the real app under uvicorn on loopback (in a thread), a render being `POST /v1/runs`
  (input/text -> alibaba/wan, format png: a lossless APNG take) until the websocket's
  `run_done`: the take encoded, fsynced and committed, each decoded chunk streamed as an event.
Renders alternate between the sides seed by seed, so both see the same machine load; the medians
are compared as a ratio. The first render of each side (it loads) is reported apart. Prints a
table and writes bench/results/wan_tiny.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "wan_tiny.json"
PROMPT = "a paper boat drifting down a rainy street"
MODEL = "wan2.1_t2v_tiny_diffusers"
RENDER: dict[str, Any] = {"width": 48, "height": 32, "frames": 9, "steps": 4, "guidance": 4.0}


def loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BarePipeline:
    def __init__(self, models: Path) -> None:
        import torch
        from diffusers import WanPipeline  # pyright: ignore[reportPrivateImportUsage]

        self.torch = torch
        started = time.perf_counter()
        pipe: Any = WanPipeline.from_pretrained(  # pyright: ignore[reportUnknownMemberType]
            str(models / "diffusion_models" / MODEL), dtype=torch.float32, local_files_only=True
        )
        pipe.set_progress_bar_config(disable=True)
        self.pipe = pipe
        self.load_s = time.perf_counter() - started

    def render(self, seed: int) -> float:
        t0 = time.perf_counter()
        self.pipe(
            prompt=PROMPT,
            width=RENDER["width"],
            height=RENDER["height"],
            num_frames=RENDER["frames"],
            num_inference_steps=RENDER["steps"],
            guidance_scale=RENDER["guidance"],
            generator=self.torch.Generator("cpu").manual_seed(seed),
            output_type="np",
        )
        return (time.perf_counter() - t0) * 1000


class Server:
    """The real app under uvicorn on loopback, driven over HTTP and the websocket."""

    def __init__(self, models: Path) -> None:
        import httpx
        import uvicorn

        from inline_core.config import Config
        from inline_core.server.app import create_app

        self.port = loopback_port()
        data = Path(tempfile.mkdtemp(prefix="wan-bench-"))
        config = Config(
            models_dir=models, data_dir=data, profile="cpu", port=self.port, dtype="float32"
        )
        self.server = uvicorn.Server(
            uvicorn.Config(create_app(config), host="127.0.0.1", port=self.port, log_level="error")
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

    def render(self, seed: int) -> float:
        from websockets.sync.client import connect

        node = {
            "id": "w",
            "type": "alibaba/wan",
            "params": {**RENDER, "seed": seed, "model": MODEL, "format": "png"},
            "inputs": {"prompt": {"from": "p", "output": "text"}},
        }
        graph = {
            "schemaVersion": 1,
            "nodes": [{"id": "p", "type": "input/text", "params": {"text": PROMPT}}, node],
        }
        t0 = time.perf_counter()
        response = self.client.post("/v1/runs", json={"graph": graph, "target": "w"})
        response.raise_for_status()
        run_id = response.json()["runId"]
        with connect(f"ws://127.0.0.1:{self.port}/v1/runs/{run_id}/events") as ws:
            while (event := json.loads(ws.recv()))["type"] not in ("run_done", "error"):
                pass
        if event["type"] != "run_done":
            raise RuntimeError(f"render failed: {event}")
        return (time.perf_counter() - t0) * 1000

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--renders", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads is not None:
        import torch

        torch.set_num_threads(int(args.threads))
    from inline_core.families.wan.kit import build_kit

    models = Path(tempfile.mkdtemp(prefix="wan-kit-"))
    build_kit(models, layouts=("diffusers",))
    pipe, server = BarePipeline(models), Server(models)
    try:
        first = {"pipeline": pipe.render(0), "server": server.render(0)}
        times: dict[str, list[float]] = {"pipeline": [], "server": []}
        for seed in range(1, int(args.renders) + 1):
            sides = [("pipeline", pipe.render), ("server", server.render)]
            for name, render in sides if seed % 2 else sides[::-1]:
                times[name].append(render(seed))
    finally:
        server.close()
    p_med, s_med = statistics.median(times["pipeline"]), statistics.median(times["server"])
    row = {
        **RENDER,
        "renders": len(times["server"]),
        "pipelineMedianMs": round(p_med, 2),
        "serverMedianMs": round(s_med, 2),
        "addedMs": round(s_med - p_med, 2),
        "ratio": round(s_med / p_med, 4),
        "firstMs": {k: round(v, 1) for k, v in first.items()},
        "ms": {k: [round(x, 2) for x in v] for k, v in times.items()},
    }
    print(f"{'pipe ms':>9} {'server ms':>10} {'+ms':>8} {'ratio':>6}")
    print(f"{p_med:>9.2f} {s_med:>10.2f} {s_med - p_med:>8.2f} {s_med / p_med:>6.3f}")
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "threads": args.threads,
        "loadAverage": list(os.getloadavg()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine, "row": row}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
