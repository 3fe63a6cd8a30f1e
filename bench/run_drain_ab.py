"""Trivial runs under a submission storm: how many a server executes, this checkout against another.

    git worktree add /tmp/before-store be643a1   # the run store before leases and claims
    .venv/bin/python bench/run_drain_ab.py --before /tmp/before-store [--rounds 3]

Each round starts a real `python -m inline_core.server` (SQLite, its own data dir) from this tree
("after") and from the other one ("before") in turn, each as its own process from its own tree
(`PYTHONPATH=<tree>/src`, this environment's interpreter), so both see the same machine load (this
machine is shared). It drives `POST /v1/runs` of a graph that does almost nothing (an input/text
node as target) from `--clients` raw keep-alive connections for `--seconds`, then reads
`/v1/health`: runs submitted and executed per second during the load, the queue left when it
stopped, and how long the server took to drain it. Each figure is the median over the rounds;
"after / before" is the ratio of those medians. The two sides of a round run back to back, so the
median of each round's own ratio ("paired") is printed too: it moves less when the machine's load
drifts between rounds. Prints a table and writes bench/results/run_drain_ab.json.

Target: after / before >= 0.85 for executed runs/s, and a queue drained after the load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import httpx
from server_submit import Tally, graph_for, raw_user, start_server, stop_server

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "run_drain_ab.json"
DRAIN_LIMIT_S = 120.0
TARGET = 0.85  # executed/s, after over before

FIGURES: dict[str, Callable[[dict[str, Any]], float]] = {
    "submitted/s": lambda r: r["submittedPerS"],
    "executed/s": lambda r: r["executedPerS"],
    "queued at end": lambda r: r["queuedAtEnd"],
    "drain s": lambda r: r["drainS"],
    "server cpu ms/run": lambda r: r["serverCpuMsPerRun"],
}


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def finished(port: int, accepted: int) -> tuple[int, int]:
    """(runs executed so far, runs still queued) from the server's health."""
    runs = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=30).json()["runs"]
    queued, running = int(runs["queued"]), int(runs["running"])
    return accepted - queued - running, queued


async def storm(port: int, users: int, seconds: float, tally: Tally) -> float:
    graph, target = graph_for("text")
    body = json.dumps({"graph": graph, "target": target}).encode()
    url = f"http://127.0.0.1:{port}/v1/runs"
    began = time.perf_counter()
    await asyncio.gather(*(raw_user(url, body, began + seconds, tally) for _ in range(users)))
    return time.perf_counter() - began


def one_side(tree: Path, users: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, _ready = start_server(Path(tmp), {"PYTHONPATH": str(tree / "src")})
        try:
            warm = Tally()
            asyncio.run(storm(port, users, 0.5, warm))
            warm_accepted = warm.statuses.get(201, 0)
            executed_before, _ = finished(port, warm_accepted)
            tally = Tally()
            cpu_at_start = cpu_s(proc.pid)
            wall = asyncio.run(storm(port, users, seconds, tally))
            cpu = cpu_s(proc.pid) - cpu_at_start
            accepted = warm_accepted + tally.statuses.get(201, 0)
            executed, queued = finished(port, accepted)
            stopped = time.perf_counter()
            left = queued
            while left > 0 and time.perf_counter() - stopped < DRAIN_LIMIT_S:
                time.sleep(0.05)
                _, left = finished(port, accepted)
            drain_s = time.perf_counter() - stopped
        finally:
            stop_server(proc)
    return {
        "tree": str(tree),
        "seconds": round(wall, 2),
        "accepted": tally.statuses.get(201, 0),
        "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
        "submittedPerS": round(tally.statuses.get(201, 0) / wall, 1),
        "executedPerS": round((executed - executed_before) / wall, 1),
        "queuedAtEnd": queued,
        # The server's CPU during the load per run it executed (its submission included).
        "serverCpuMsPerRun": round(cpu / max(1, executed - executed_before) * 1000, 3),
        "drainS": round(drain_s, 2),
        "drained": left == 0,
    }


def commit(tree: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description="Trivial runs under a submission storm, A/B.")
    parser.add_argument("--before", type=Path, required=True, help="a checkout of earlier code")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    before = cast(Path, args.before).resolve()
    if not (before / "src" / "inline_core" / "server").is_dir():
        parser.error(f"{before} is not a checkout of this project")
    trees = {"after": ROOT, "before": before}
    load_at_start = os.getloadavg()[0]
    sides: dict[str, list[dict[str, Any]]] = {"after": [], "before": []}
    for i in range(args.rounds):
        for name in ("after", "before") if i % 2 == 0 else ("before", "after"):
            row = one_side(trees[name], args.clients, args.seconds)
            sides[name].append(row)
            print(
                f"round {i + 1} {name:6}: {row['submittedPerS']:8.1f} submitted/s "
                f"{row['executedPerS']:8.1f} executed/s, {row['queuedAtEnd']:5} queued at the "
                f"end, drained in {row['drainS']:.2f} s, {row['serverCpuMsPerRun']:.3f} ms of "
                "server CPU per run",
                flush=True,
            )
    figures: list[dict[str, Any]] = []
    print(f"\n{'figure':17} {'after':>9} {'before':>9} {'a/b':>7} {'paired':>7}")
    for figure, read in FIGURES.items():
        medians = {name: statistics.median(read(r) for r in rows) for name, rows in sides.items()}
        ratio = medians["after"] / medians["before"] if medians["before"] else None
        rounds = zip(sides["after"], sides["before"], strict=True)
        pairs = [read(a) / read(b) for a, b in rounds if read(b)]
        paired = statistics.median(pairs) if pairs else None
        figures.append(
            {"figure": figure, **medians, "afterOverBefore": ratio, "pairedAfterOverBefore": paired}
        )
        shown = "-" if ratio is None else f"{ratio:.2f}"
        shown_paired = "-" if paired is None else f"{paired:.2f}"
        print(
            f"{figure:17} {medians['after']:9.2f} {medians['before']:9.2f} {shown:>7} "
            f"{shown_paired:>7}"
        )
    executed = next(f for f in figures if f["figure"] == "executed/s")
    drained = all(r["drained"] for r in sides["after"])
    met = (executed["afterOverBefore"] or 0.0) >= TARGET and drained
    print(
        f"target (executed/s after/before >= {TARGET}, queue drained after the load): "
        f"{'met' if met else 'not met'}"
    )
    result = {
        "bench": "run_drain_ab",
        "after": {"tree": str(ROOT), "commit": commit(ROOT)},
        "before": {"tree": str(before), "commit": commit(before)},
        "clients": args.clients,
        "seconds": args.seconds,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "load1mAtStart": load_at_start,
        "figures": figures,
        "rounds": sides,
        "targets": {"executedPerSAfterOverBefore": TARGET, "drained": True},
        "targetMet": met,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
