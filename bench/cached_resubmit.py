"""Where an identical resubmission's time goes: POST -> run done -> take bytes, everything cached.

    .venv/bin/python bench/cached_resubmit.py [--size 1024] [--renders 40] [--profile] [--syscalls]

Two parts, side by side in one run:
- the take a cache hit gives its run, at `--size` px (bench/png_encode.py's pictures): copied as
  before (read, hash, write, fsync) against linked (`FileTakeStore.reissue`), best of N ms each;
- a live server with the tiny kit Z-Image: one render at `--size`, then `--renders` identical
  resubmissions, each timed in spans: POST answered, `run_done` on the run's websocket, the run's
  JSON and the take's bytes fetched. Medians in ms. `--profile`: py-spy samples the server
  during the resubmissions (the functions on its busy stacks); `--syscalls`: strace counts
  their system calls (fsyncs, thread wake-ups).
Prints a table and writes bench/results/cached_resubmit.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from png_encode import pictures
from server_process import start_server
from websockets.sync.client import connect

from inline_core.media import MediaKind
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.png import encode_png

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "cached_resubmit.json"


def take_ab(size: int, repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = FileTakeStore(Path(tmp))
        for name, picture in pictures(size).items():
            data = encode_png(picture, {})
            first = store.write(
                run_id="r0",
                node_id="n",
                index=0,
                kind=MediaKind.IMAGE,
                data=data,
                suffix=".png",
                params={},
            )
            copied, linked = float("inf"), float("inf")
            for i in range(repeats):
                began = time.perf_counter()
                store.write(
                    run_id=f"c{i}",
                    node_id="n",
                    index=0,
                    kind=first.kind,
                    data=Path(first.path).read_bytes(),
                    suffix=".png",
                    params=first.params,
                )
                copied = min(copied, (time.perf_counter() - began) * 1000)
                began = time.perf_counter()
                store.reissue(first, run_id=f"l{i}", node_id="n", index=0)
                linked = min(linked, (time.perf_counter() - began) * 1000)
            rows.append(
                {
                    "picture": name,
                    "bytes": len(data),
                    "copyMs": round(copied, 3),
                    "linkMs": round(linked, 3),
                    "ratio": round(copied / linked, 1),
                }
            )
    return rows


def py_spy(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy recording the server (every thread, idle ones left out) into collapsed stacks;
    None where py-spy is not installed."""
    tool = Path(sys.executable).parent / "py-spy"
    if not tool.exists():
        print("py-spy is not installed: no profile (pip install py-spy)")
        return None
    command = [str(tool), "record", "--pid", str(pid), "--rate", "500", "--threads"]
    command += ["--format", "raw", "--output", str(out), "--nonblocking"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def strace(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """strace counting the server's system calls (every thread); None where it is missing."""
    tool = shutil.which("strace")
    if tool is None:
        print("strace is not installed: no system call counts")
        return None
    command = [tool, "-f", "-c", "-o", str(out), "-p", str(pid)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def hot_frames(collapsed: Path, rows: int = 25) -> list[tuple[str, float]]:
    """Share of the server's busy samples in which each function is on the stack (inclusive)."""
    counts: dict[str, int] = {}
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        for frame in set(stack.split(";")[1:]):  # the thread's name first
            counts[frame] = counts.get(frame, 0) + int(n)
    ranked = sorted(counts.items(), key=lambda item: item[1], reverse=True)[:rows]
    return [(frame, round(n / max(total, 1), 3)) for frame, n in ranked]


def server_spans(
    size: int, renders: int, profile: Path | None = None, syscalls: Path | None = None
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        cli = str(Path(sys.executable).parent / "inline-core")
        subprocess.run(
            [cli, "kit", "--out", str(models)],
            check=True,
            capture_output=True,
        )
        server = start_server(models, Path(tmp) / "d", Path(tmp) / "server.log")
        base = server.base.removeprefix("http://")
        try:
            client = httpx.Client(timeout=120)
            graph = {
                "schemaVersion": 1,
                "nodes": [
                    {"id": "p", "type": "input/text", "params": {"text": "a lighthouse at dusk"}},
                    {
                        "id": "img",
                        "type": "alibaba/z-image-turbo",
                        "params": {"width": size, "height": size, "steps": 2, "seed": 7},
                        "inputs": {"prompt": {"from": "p", "output": "text"}},
                    },
                ],
            }
            spans: list[tuple[float, float, float, float]] = []
            spy: subprocess.Popen[bytes] | None = None
            for i in range(renders + 1):
                if i == 1 and profile is not None:  # the resubmissions alone
                    spy = py_spy(server.proc.pid, profile)
                    # Neither tracer says when it has attached: a second's grace (a bench, not a
                    # test), so the first resubmission it times is traced whole.
                    time.sleep(1.0)
                if i == 1 and syscalls is not None:
                    spy = strace(server.proc.pid, syscalls)
                    time.sleep(1.0)  # as above
                t0 = time.perf_counter()
                answer = client.post(
                    f"http://{base}/v1/runs", json={"graph": graph, "target": "img"}
                )
                answer.raise_for_status()
                run_id = answer.json()["runId"]
                t1 = time.perf_counter()
                with connect(f"ws://{base}/v1/runs/{run_id}/events") as ws:
                    while json.loads(ws.recv(timeout=600))["type"] not in (
                        "run_done",
                        "error",
                        "cancelled",
                    ):
                        pass
                t2 = time.perf_counter()
                take = client.get(f"http://{base}/v1/runs/{run_id}").json()["takes"][0]
                t3 = time.perf_counter()
                client.get(f"http://{base}{take['uri']}").raise_for_status()
                t4 = time.perf_counter()
                if i:  # the first one renders
                    spans.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
        finally:
            server.stop()
    names = ("postMs", "toDoneMs", "runJsonMs", "takeBytesMs")
    result = {
        n: round(statistics.median(s[k] for s in spans) * 1000, 2) for k, n in enumerate(names)
    }
    result["totalMs"] = round(statistics.median(sum(s) for s in spans) * 1000, 2)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--renders", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="py-spy the resubmissions")
    parser.add_argument(
        "--syscalls", action="store_true", help="count the resubmissions' system calls (strace)"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    takes = take_ab(args.size, args.repeats)
    collapsed = OUT.with_suffix(".pyspy.txt") if args.profile else None
    counted = OUT.with_suffix(".strace.txt") if args.syscalls else None
    spans = server_spans(args.size, args.renders, collapsed, counted)
    if counted is not None and counted.exists():
        print(f"system calls of {args.renders} resubmissions (strace -c):")
        print(counted.read_text())
    print(f"take of a cache hit at {args.size} px (best of {args.repeats}, load {load:.1f})")
    print(f"{'picture':14} {'bytes':>9} {'copy ms':>9} {'link ms':>9} {'ratio':>7}")
    for r in takes:
        print(
            f"{r['picture']:14} {r['bytes']:>9} {r['copyMs']:>9} {r['linkMs']:>9} {r['ratio']:>6}x"
        )
    print(f"identical resubmission at {args.size} px, median of {args.renders} (ms)")
    for name, value in spans.items():
        print(f"  {name:12} {value:>8}")
    body: dict[str, Any] = {"size": args.size, "load": load, "takes": takes, "server": spans}
    if collapsed is not None and collapsed.exists():
        hot = hot_frames(collapsed)
        print("where the server's busy samples are (share of samples with the frame on stack)")
        for frame, share in hot:
            print(f"  {share:6.1%}  {frame}")
        body["hotFrames"] = hot
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(body, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
