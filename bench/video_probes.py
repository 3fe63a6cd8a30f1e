"""What only a served video render shows, as `wan_video.py` and `ltx2_video.py` both measure it:
the server process's peak RSS over renders of several frame counts, and when a take's first MP4
bytes come (Linux: `/proc/PID/status` and `clear_refs`).

Each RSS sample is a fresh server (`wan_tiny.Server` or a subclass with its own node) warmed by a
short render, its peak reset, then the render of F frames; its rows put the peak beside the
frames' own bytes, which is all that should grow with F while the decode holds one chunk's
activations at a time.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wan_tiny import Case, Server

MB = 1024 * 1024
FIRST_BYTES_MEDIANS = ("firstByteS", "streamEndS", "decodeShareAtFirstByte", "firstByteOverTake")


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


# -- first bytes ----------------------------------------------------------------------------------


def first_bytes_once(server: Server, case: Case, seed: int) -> dict[str, float]:
    import httpx
    from websockets.sync.client import connect

    t0 = time.perf_counter()
    run_id = server.submit(case, seed)
    seen: dict[str, float] = {}

    def since() -> float:
        return time.perf_counter() - t0

    def read_stream() -> None:
        url = f"http://127.0.0.1:{server.port}/v1/runs/{run_id}/media/w"
        size = 0
        with httpx.stream("GET", url, timeout=600) as response:
            response.raise_for_status()
            for chunk in response.iter_bytes():
                if size == 0 and chunk:
                    seen["firstByteS"] = since()
                size += len(chunk)
        seen["streamEndS"] = since()
        seen["streamBytes"] = size

    reader = threading.Thread(target=read_stream)
    reader.start()
    with connect(f"ws://127.0.0.1:{server.port}/v1/runs/{run_id}/events") as ws:
        while True:
            event = json.loads(ws.recv(timeout=600))
            kind, now = event["type"], since()
            if kind == "progress" and event.get("phase") == "sample":
                if event.get("step") == event.get("stepCount"):
                    seen["lastStepS"] = now
            elif kind == "progress" and event.get("phase") == "decode":
                seen.setdefault("decodeStartS", now)
            elif kind == "chunk":
                seen.setdefault("firstChunkS", now)
                seen["lastChunkS"] = now
            elif kind in ("run_done", "error", "cancelled"):
                if kind != "run_done":
                    raise RuntimeError(f"render failed: {event}")
                seen["runDoneS"] = now
                break
    reader.join()
    start = seen.get("decodeStartS", seen["lastStepS"])
    decode = seen["lastChunkS"] - start
    seen["decodeShareAtFirstByte"] = (seen["firstByteS"] - start) / decode
    seen["firstByteOverTake"] = seen["firstByteS"] / seen["streamEndS"]
    return {k: round(v, 4) for k, v in seen.items()}


def first_bytes(server: Server, warm: Case, case: Case, rounds: int) -> dict[str, Any]:
    """`warm` rendered (it loads the model), then `rounds` first-bytes runs of `case` and their
    medians; `server` closed at the end."""
    try:
        server.render(warm, 0)
        runs = [first_bytes_once(server, case, seed) for seed in range(1, rounds + 1)]
    finally:
        server.close()
    medians = {k: round(statistics.median(r[k] for r in runs), 4) for k in FIRST_BYTES_MEDIANS}
    return {"case": case.name, "frames": case.frames, "runs": runs, "median": medians}


# -- peak RSS -------------------------------------------------------------------------------------


def peak_at_decode(server: Server, case: Case, seed: int) -> float:
    """Render `case`; the server's peak RSS (MB) when its decode began (the sampling's)."""
    from websockets.sync.client import connect

    pid, sampled = server.proc.pid, 0.0
    run_id = server.submit(case, seed)
    with connect(f"ws://127.0.0.1:{server.port}/v1/runs/{run_id}/events") as ws:
        while (event := json.loads(ws.recv(timeout=900)))["type"] not in ("run_done", "error"):
            if event["type"] == "progress" and event.get("phase") == "decode" and not sampled:
                sampled = status_kb(pid, "VmHWM") / 1024
    if event["type"] != "run_done":
        raise RuntimeError(f"render failed: {event}")
    return sampled


@dataclass
class RssSamples:
    """Per frame count, each round's figures (MB)."""

    frames: tuple[int, ...]
    peaks: dict[int, list[float]] = field(default_factory=dict[int, list[float]])
    befores: dict[int, list[float]] = field(default_factory=dict[int, list[float]])
    at_decode: dict[int, list[float]] = field(default_factory=dict[int, list[float]])


def sample_rss(
    start: Callable[[], Server],
    warm: Case,
    case: Callable[[int], Case],
    frames: tuple[int, ...],
    rounds: int,
    at_decode: bool = False,
) -> RssSamples:
    """Per frame count F and round (the counts' order reversed every other round), a fresh
    server from `start`: `warm` rendered (the model loaded, the heap warm), the peak reset, then
    `case(F)` rendered; its RSS before and its peak (`at_decode`: also the peak when its decode
    began)."""
    out = RssSamples(frames)
    for f in frames:
        out.peaks[f], out.befores[f], out.at_decode[f] = [], [], []
    for round_ in range(rounds):
        for f in frames if round_ % 2 == 0 else frames[::-1]:
            server = start()
            pid = server.proc.pid
            try:
                server.render(warm, 0)
                Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again here
                out.befores[f].append(status_kb(pid, "VmRSS") / 1024)
                if at_decode:
                    out.at_decode[f].append(peak_at_decode(server, case(f), 1))
                else:
                    server.render(case(f), 1)
                out.peaks[f].append(status_kb(pid, "VmHWM") / 1024)
            finally:
                server.close()
    return out


def rss_rows(samples: RssSamples, side: int, chunks: Mapping[int, int]) -> list[dict[str, Any]]:
    """Each frame count's medians, its growth over the first count's peak beside the frames' own
    bytes (`side` x `side` x 3 of uint8 a frame), in `chunks[F]` decode chunks."""
    first = samples.frames[0]
    base = statistics.median(samples.peaks[first])
    rows: list[dict[str, Any]] = []
    for f in samples.frames:
        peak = statistics.median(samples.peaks[f])
        row: dict[str, Any] = {
            "frames": f,
            "chunks": chunks[f],
            "peakMb": round(peak, 1),
            "beforeMb": round(statistics.median(samples.befores[f]), 1),
        }
        if samples.at_decode[f]:  # the peak when the decode began: what sampling took
            row["samplingPeakMb"] = round(statistics.median(samples.at_decode[f]), 1)
        row["growthMb"] = round(peak - base, 1)  # over the first frame count's peak
        row["framesGrowthMb"] = round((f - first) * side * side * 3 / MB, 2)
        row["peaksMb"] = [round(p, 1) for p in samples.peaks[f]]
        rows.append(row)
    return rows
