"""What running a node in a pack costs: the same operation as a built-in node and as a pack node,
and a pack worker's cold start.

    .venv/bin/python bench/pack_overhead.py [--repeats 40] [--starts 5]

Installs the pillow11 test pack (tests/packs/fixtures) into a temporary packs folder with uv, then
times `image/flip` (built-in, in process) against `pillow11/flip` (the same transpose in the pack's
worker, Pillow 11) at 64 and 1024 px, warm, interleaved; both write their PNG take. The added time
is the median of the per-pair differences in wall time, and the mean difference in CPU time
(this process and the worker: on a shared machine the wall clock counts other people's work
too). The same comparison without the takes isolates the pack's transport from the PNG encode
(tens of ms at 1024 px, and noisy). Cold start: spawning a worker until it says hello, and that
plus a first 64 px call. Prints tables; writes bench/results/pack_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from PIL import Image

from inline_core_sdk.version import sdk_version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inline_core.graph.image_nodes import Flip, register_image_nodes  # noqa: E402
from inline_core.graph.registry import Registry  # noqa: E402
from inline_core.graph.runner import NodeCall  # noqa: E402
from inline_core.packs.environment import Installer  # noqa: E402
from inline_core.packs.host import PackHost  # noqa: E402
from inline_core.packs.install import install_pack  # noqa: E402
from inline_core.packs.process import Limits, PackProcess  # noqa: E402
from inline_core.packs.scratch import scratch_root  # noqa: E402
from inline_core.packs.store import PackStore  # noqa: E402
from inline_core.runtime.cancel import CancelToken  # noqa: E402
from inline_core.runtime.context import ExecutionContext  # noqa: E402
from inline_core.runtime.file_store import FileTakeStore  # noqa: E402
from inline_core_sdk.media import write_image  # noqa: E402
from tests.packs.pack_support import FIXTURES  # noqa: E402

OUT = ROOT / "bench" / "results" / "pack_overhead.json"
SIZES = (64, 1024)
PARAMS = {"direction": "horizontal"}


def picture(size: int) -> Image.Image:
    """Soft colour clouds (what a render looks like to PNG, roughly)."""
    rng = np.random.default_rng(7)
    small = Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    return small.resize((size, size), Image.Resampling.BICUBIC)


Op = Callable[[Image.Image], object]


class Clock:
    """Wall time, and CPU time of this process plus the pack's worker: on a shared machine the
    wall clock also counts other people's work, the CPU clock only ours."""

    def __init__(self, host: PackHost) -> None:
        self.host = host

    def _worker_cpu(self) -> float:
        worker = self.host.slots["pillow11"].worker
        pid = worker.process.pid if worker is not None else None
        if pid is None:
            return 0.0
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system

    def timed(self, op: Op, image: Image.Image) -> tuple[float, float]:
        cpu, worker, began = time.process_time(), self._worker_cpu(), time.perf_counter()
        op(image)
        wall = (time.perf_counter() - began) * 1000
        spent = (time.process_time() - cpu + self._worker_cpu() - worker) * 1000
        return wall, spent


def compare(clock: Clock, built_in: Op, pack: Op, repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for size in SIZES:
        image = picture(size)
        clock.timed(pack, image)  # warm: the worker is started and has run once
        clock.timed(built_in, image)
        pairs = [(clock.timed(built_in, image), clock.timed(pack, image)) for _ in range(repeats)]
        added = sorted(p[0] - b[0] for b, p in pairs)
        rows.append(
            {
                "size": size,
                "builtInMs": round(statistics.median(b[0] for b, _ in pairs), 2),
                "packMs": round(statistics.median(p[0] for _, p in pairs), 2),
                "addedMs": round(statistics.median(added), 2),
                "addedP90Ms": round(added[int(0.9 * repeats)], 2),
                # A mean: the worker's CPU clock ticks in 10 ms steps, so only a sum is exact.
                "addedCpuMs": round(sum(p[1] - b[1] for b, p in pairs) / repeats, 2),
                "repeats": repeats,
            }
        )
    return rows


def node_ops(host: PackHost, registry: Registry, ctx: ExecutionContext) -> dict[str, tuple[Op, Op]]:
    """(built-in, pack) pairs: whole nodes writing their PNG takes, and the same without takes
    (the operation in process against the pack's call: its transport alone)."""
    built_in, pack = registry.runner("image/flip"), registry.runner("pillow11/flip")
    assert built_in is not None and pack is not None
    loaded = host.slots["pillow11"].loaded
    assert loaded is not None
    flip = loaded.nodes["flip"]

    def call(image: Image.Image) -> NodeCall:
        return NodeCall(ctx, "n", PARAMS, {"image": image})

    return {
        "nodes (with takes)": (
            lambda image: built_in.run(call(image)),
            lambda image: pack.run(call(image)),
        ),
        "operation (no takes)": (
            lambda image: Flip().transform(image, PARAMS),
            lambda image: host.outputs(flip, call(image)),
        ),
    }


def cold_starts(host: PackHost, starts: int) -> dict[str, Any]:
    loaded = host.slots["pillow11"].loaded
    assert loaded is not None
    image = picture(64)
    hello: list[float] = []
    first: list[float] = []
    for _ in range(starts):
        scratch = Path(tempfile.mkdtemp(dir=scratch_root()))
        process = PackProcess(loaded, scratch, host.store.root / "bench-worker.log")
        began = time.perf_counter()
        process.start()
        hello.append((time.perf_counter() - began) * 1000)
        call_dir = scratch / "call"
        call_dir.mkdir()
        ref = write_image(image, call_dir / "in.raw").to_wire()
        limits = Limits(60, 2048)
        process.call("flip", PARAMS, {"image": ref}, call_dir, limits, CancelToken(), print)
        first.append((time.perf_counter() - began) * 1000)
        process.stop()
    return {
        "starts": starts,
        "helloMedianMs": round(statistics.median(hello), 1),
        "helloMinMs": round(min(hello), 1),
        "helloMaxMs": round(max(hello), 1),
        "firstCallMedianMs": round(statistics.median(first), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pack-bench-") as tmp:
        packs = Path(tmp) / "packs"
        report = install_pack(
            str(FIXTURES / "pillow11"), PackStore(packs), Installer.choose(), sdk_version()
        )
        print(f"installed pillow11 with {report.installer} in {report.seconds:.1f} s")
        registry = Registry()
        register_image_nodes(registry)
        host = PackHost(packs, registry, watch=False)
        host.start()
        ctx = ExecutionContext(run_id="run_bench", takes=FileTakeStore(Path(tmp) / "takes"))
        try:
            clock = Clock(host)
            tables = {
                name: compare(clock, built_in, pack, args.repeats)
                for name, (built_in, pack) in node_ops(host, registry, ctx).items()
            }
            cold = cold_starts(host, args.starts)
        finally:
            host.close()
    for name, rows in tables.items():
        print(f"{name}: built-in image/flip against pillow11/flip, medians of {args.repeats}")
        print(
            f"{'size':>6s} {'built-in ms':>12s} {'pack ms':>9s} {'added ms':>9s} {'p90':>7s} "
            f"{'added CPU ms':>13s}"
        )
        for row in rows:
            print(
                f"{row['size']:6d} {row['builtInMs']:12.2f} {row['packMs']:9.2f} "
                f"{row['addedMs']:9.2f} {row['addedP90Ms']:7.2f} {row['addedCpuMs']:13.2f}"
            )
    print(
        f"cold start: hello {cold['helloMedianMs']:.1f} ms median "
        f"({cold['helloMinMs']:.1f}-{cold['helloMaxMs']:.1f}), hello + first 64 px call "
        f"{cold['firstCallMedianMs']:.1f} ms, over {cold['starts']} starts"
    )
    OUT.parent.mkdir(exist_ok=True)
    load = os.getloadavg()[0]
    print(f"load average while measuring: {load:.1f} on {os.cpu_count()} cores")
    body = {**tables, "coldStart": cold, "loadAverage": round(load, 2), "cores": os.cpu_count()}
    OUT.write_text(json.dumps(body, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
