"""Download throughput: one large file from a local hub through `POST /v1/downloads` against a
bare `huggingface_hub.hf_hub_download` of the same file, and the server's CPU per MB.

Run by hand: `python bench/download_throughput.py [--mb 1024] [--rounds 2]`. The hub
(`tests/downloads/fake_hub.py`) runs in a process of its own on 127.0.0.1 and serves the file with
sendfile; the server is a real `python -m inline_core.server`. Through the route the time runs
from the POST to the download's `done` (fetched, hashed, verified, moved into the catalog); the
bare download is `hf_hub_download(..., local_dir=...)` in a child process (no hash check). Large
files are deleted after each round. Prints a table, writes bench/results/download_throughput.json.

Target (issue 17): route / bare >= 0.9. The route can come out ahead: huggingface_hub's `http_get`
gathers 10 MB chunks in memory before each write, where the route writes each chunk as it comes
(and hashes it on another thread). On a loaded machine both figures move; the ratio is the point.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.server.server_support import LiveServer  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "download_throughput.json"
REPO, NAME = "bench/big", "big.safetensors"
MB = 1024 * 1024
BARE = """
import sys, time
from huggingface_hub import hf_hub_download
t = time.perf_counter()
hf_hub_download(sys.argv[1], sys.argv[2], local_dir=sys.argv[3], endpoint=sys.argv[4])
print(time.perf_counter() - t)
"""


def write_big(path: Path, mb: int) -> None:
    block = os.urandom(16 * MB)
    with path.open("wb") as f:
        for _ in range(mb // 16):
            f.write(block)


def start_hub(source: Path) -> tuple[subprocess.Popen[str], str]:
    hub_script = ROOT / "tests" / "downloads" / "fake_hub.py"
    proc = subprocess.Popen(
        [sys.executable, str(hub_script), "--repo", REPO, "--file", f"{NAME}={source}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def bare_download(hub_url: str, out: Path, env: dict[str, str]) -> float:
    answer = subprocess.run(
        [sys.executable, "-c", BARE, REPO, NAME, str(out), hub_url],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(answer.stdout.strip().splitlines()[-1])


def route_download(live: LiveServer) -> tuple[float, float]:
    """(seconds from POST to done, server CPU seconds meanwhile)."""
    assert live.proc is not None
    server = psutil.Process(live.proc.pid)
    cpu0 = sum(server.cpu_times()[:2])
    t0 = time.perf_counter()
    body = {"repo": REPO, "files": [NAME], "category": "checkpoints"}
    posted = httpx.post(f"{live.base}/v1/downloads", json=body, timeout=60)
    posted.raise_for_status()
    url = f"{live.base}/v1/downloads/{posted.json()['downloadId']}"
    while True:
        state = httpx.get(url, timeout=60).json()
        if state["status"] in ("done", "error", "cancelled"):
            break
        time.sleep(0.05)
    seconds = time.perf_counter() - t0
    assert state["status"] == "done", state
    return seconds, sum(server.cpu_times()[:2]) - cpu0


def main() -> int:
    parser = argparse.ArgumentParser(description="download throughput: route vs bare")
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="inline-dl-bench-"))
    hub: subprocess.Popen[str] | None = None
    live: LiveServer | None = None
    try:
        source = work / "source" / NAME
        source.parent.mkdir(parents=True)
        write_big(source, args.mb)
        hub, hub_url = start_hub(source)
        env = {**os.environ, "HF_HOME": str(work / "hf-home"), "HF_ENDPOINT": hub_url}
        env.pop("HF_TOKEN", None)
        live = LiveServer(
            data_dir=work / "data",
            models_dir=work / "models",
            env={
                "HF_ENDPOINT": hub_url,
                "HF_HOME": str(work / "hf-home"),
                "INLINE_MIN_FREE_DISK_MB": "0",
            },
        )
        live.start()
        bare_s: list[float] = []
        route_s: list[float] = []
        cpu_s: list[float] = []
        for _ in range(args.rounds):
            bare_s.append(bare_download(hub_url, work / "bare", env))
            shutil.rmtree(work / "bare")
            seconds, cpu = route_download(live)
            route_s.append(seconds)
            cpu_s.append(cpu)
            shutil.rmtree(work / "models" / "checkpoints")
            for record in (work / "models" / ".downloads").glob("*.json"):
                record.unlink()  # the next round downloads the same file again
        size_mb = args.mb
        bare, route = statistics.median(bare_s), statistics.median(route_s)
        result: dict[str, Any] = {
            "mb": size_mb,
            "rounds": args.rounds,
            "bare_s": bare_s,
            "route_s": route_s,
            "server_cpu_s": cpu_s,
            "bare_mb_s": round(size_mb / bare, 1),
            "route_mb_s": round(size_mb / route, 1),
            "ratio": round(bare / route, 3),
            "server_cpu_ms_per_mb": round(1000 * statistics.median(cpu_s) / size_mb, 3),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        }
        print(f"{'download of ' + str(size_mb) + ' MB':<34} {'median s':>9} {'MB/s':>8}")
        print(f"{'bare hf_hub_download':<34} {bare:9.2f} {result['bare_mb_s']:8.1f}")
        print(f"{'POST /v1/downloads (verified)':<34} {route:9.2f} {result['route_mb_s']:8.1f}")
        print(f"route / bare throughput: {result['ratio']:.3f}  (target >= 0.9)")
        print(f"server CPU: {result['server_cpu_ms_per_mb']:.3f} ms per MB")
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2))
        print(f"wrote {RESULTS}")
    finally:
        if live is not None:
            live.close()
        if hub is not None:
            hub.kill()
            hub.wait()
        shutil.rmtree(work, ignore_errors=True)  # the large files go with it
    return 0


if __name__ == "__main__":
    sys.exit(main())
