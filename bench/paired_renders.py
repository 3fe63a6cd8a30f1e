"""The two measurements every server-vs-pipeline bench makes, shared: renders alternating between
the two sides seed by seed (so both see the same machine load; the first render of each side,
which loads, left out), and the wall time of renders submitted at once."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

Render = Callable[[int], float]  # a seed -> the render's milliseconds


def paired(server: Render, pipeline: Render, renders: int) -> dict[str, Any]:
    """`renders` + 1 renders a side, alternating; medians of all but the first, and their ratio."""
    ours: list[float] = []
    theirs: list[float] = []
    for seed in range(renders + 1):
        ours.append(server(seed))
        theirs.append(pipeline(seed))
    server_ms, pipeline_ms = statistics.median(ours[1:]), statistics.median(theirs[1:])
    return {
        "server_ms": round(server_ms, 1),
        "pipeline_ms": round(pipeline_ms, 1),
        "ratio": round(server_ms / pipeline_ms, 3),
        "first_server_ms": round(ours[0], 1),
        "first_pipeline_ms": round(theirs[0], 1),
    }


def concurrent_ms(render: Render, count: int) -> float:
    """Wall milliseconds for `count` renders (seeds 0..count-1) submitted at once."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        list(pool.map(render, range(count)))
    return (time.perf_counter() - t0) * 1000
