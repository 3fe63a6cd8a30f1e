"""What the worker group costs: start-up, per-job overhead over the compute, fault detection.

    .venv/bin/python bench/parallel_overhead.py [--jobs 20] [--ranks 2]

On CPU ranks over gloo (INLINE_PROFILE=cpu, INLINE_PARALLEL=ulysses=2) with the tiny Z-Image kit:
- start-up: launch to every rank ready, for the tiny Z-Image pipeline and for a model-free runner;
- per job: the in-process render, the group round trip, and rank 0's own compute time for the job;
  the IPC overhead is round trip minus rank 0's compute (targets: ready within 10 s, overhead at
  most 5 ms per job);
- faults: from a rank's SIGKILL / SIGSTOP to the job's error (the tree already torn down), and from
  a server's SIGKILL to its last rank gone.
Prints a table and writes bench/results/parallel.json. Z-Image goes through the real path: the
ranks rebuild the stack with the shared rank loader (`engine/remote.py`) from the spec the
server sends, and jobs are sent through the weightless handle the server uses (`engine/group.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "parallel"
RESULTS = Path(__file__).parent / "results"
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from inline_core.device.split import ParallelSpec  # noqa: E402
from inline_core.engine.group import ModelGroup  # noqa: E402
from inline_core.families.zimage import ZImageFamily  # noqa: E402
from inline_core.families.zimage.kit import build_kit  # noqa: E402
from inline_core.models.catalog import Catalog  # noqa: E402
from inline_core.parallel.config import GroupConfig  # noqa: E402
from inline_core.parallel.errors import WorkerGroupError  # noqa: E402
from inline_core.parallel.group import WorkerGroup  # noqa: E402
from inline_core.parallel.runner import DEFAULT_RUNNER, resolve  # noqa: E402
from inline_core.parallel.sampler import ParallelSampler  # noqa: E402
from inline_core.parallel.settings import RankSettings  # noqa: E402
from inline_core.runtime.cancel import CancelToken  # noqa: E402
from inline_core.sampling import SampleJob, StepLoopSampler  # noqa: E402
from tests.parallel.parallel_support import wait_gone  # noqa: E402

KW: dict[str, Any] = {"prompt": "a red fox", "width": 64, "height": 64, "steps": 4, "seed": 7}


def config(ranks: int, runner: str = "collective_runner:load", **kw: Any) -> GroupConfig:
    base = GroupConfig(
        RankSettings(split=ParallelSpec.of(ulysses=ranks), runner=runner, heartbeat_s=0.2),
        heartbeat_timeout_s=2.0,
        env={"PYTHONPATH": str(TESTS), "INLINE_PROFILE": "cpu"},
    )
    return replace(base, **kw)


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _ignore_phase(_phase: str) -> None:
    return None


def _ignore_step(_step: int, _count: int) -> None:
    return None


def bench_zimage(models_dir: Path, ranks: int, jobs: int) -> dict[str, Any]:
    family = ZImageFamily(Catalog(models_dir), {})
    sources = family.files.resolve().require()
    dtypes = {"text_encoder": "float32", "denoiser": "float32", "vae": "float32"}
    cfg = config(ranks, DEFAULT_RUNNER)
    sampler = ParallelSampler(cfg)
    group = ModelGroup(ParallelSpec.of(ulysses=ranks), sampler)
    handle = group.pipeline_for(family, sources, dtypes)  # what the server holds: no weights
    spec = handle.remote_spec()
    pipe: Any = resolve(spec.loader)(device="cpu", **spec.args)  # the in-process reference

    def in_process(threads: int) -> float:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        loop = StepLoopSampler()
        try:
            loop.run(SampleJob(pipeline=pipe, state=pipe.request(guidance=0.0, **KW)))
            times: list[float] = []
            for _ in range(jobs):
                began = time.perf_counter()
                loop.run(SampleJob(pipeline=pipe, state=pipe.request(guidance=0.0, **KW)))
                times.append(time.perf_counter() - began)
            return statistics.median(times)
        finally:
            loop.close()
            torch.set_num_threads(previous)

    local_default = in_process(torch.get_num_threads())
    local_rank_threads = in_process(cfg.rank_threads())

    def split_render() -> None:
        state = handle.request(guidance=0.0, **KW)
        job = SampleJob(
            handle, state, cancel=CancelToken(), on_phase=_ignore_phase, on_step=_ignore_step
        )
        group.run(job)

    try:
        began = time.perf_counter()
        group.start(handle)
        start_s = time.perf_counter() - began
        group_stats: Any = sampler.stats()["group"]
        connect_s = float(group_stats["lastConnectS"])
        split_render()  # warm-up
        round_trips: list[float] = []
        computes: list[float] = []
        controls: list[float] = []
        for _ in range(jobs):
            began = time.perf_counter()
            split_render()
            round_trips.append(time.perf_counter() - began)
            meta = sampler.last_meta[0]
            controls.append(float(str(meta["controlS"])))
            computes.append(float(str(meta["computeS"])) - controls[-1])
        # Overhead: everything but rank 0's own compute (transport both ways, job hand-out to
        # the other ranks, and the per-step progress/cancel traffic).
        overheads = [rt - c for rt, c in zip(round_trips, computes, strict=True)]
        tokens = {r: m.get("attentionTokens") for r, m in sampler.last_meta.items()}
    finally:
        began = time.perf_counter()
        group.close()
        close_s = time.perf_counter() - began
    return {
        "closeS": round(close_s, 3),
        "startS": round(start_s, 3),
        "ranksConnectedS": round(connect_s, 3),
        "inProcessMs": ms(local_default),
        "inProcessRankThreadsMs": ms(local_rank_threads),
        "roundTripMs": ms(statistics.median(round_trips)),
        "rank0ComputeMs": ms(statistics.median(computes)),
        "controlMs": ms(statistics.median(controls)),
        "ipcOverheadMs": ms(statistics.median(overheads)),
        "ipcOverheadMinMs": ms(min(overheads)),
        "ipcOverheadMaxMs": ms(max(overheads)),
        "attentionTokensPerRank": tokens,
    }


def bench_collective(ranks: int, jobs: int) -> dict[str, Any]:
    group = WorkerGroup(config(ranks))
    try:
        began = time.perf_counter()
        group.start()
        start_s = time.perf_counter() - began
        group.submit({"steps": 1})
        round_trips: list[float] = []
        overheads: list[float] = []
        payload = os.urandom(64 * 64 * 3)
        for _ in range(jobs):
            began = time.perf_counter()
            reply = group.submit({"steps": 1}, {"payload": payload})
            rt = time.perf_counter() - began
            round_trips.append(rt)
            meta = reply.meta[0]
            compute = float(str(meta["computeS"])) - float(str(meta["controlS"]))
            overheads.append(rt - compute)
    finally:
        group.close()
    return {
        "startS": round(start_s, 3),
        "roundTripMs": ms(statistics.median(round_trips)),
        "ipcOverheadMs": ms(statistics.median(overheads)),
        "ipcOverheadMinMs": ms(min(overheads)),
    }


def detect(ranks: int, sig: signal.Signals) -> float:
    group = WorkerGroup(config(ranks))
    try:
        group.start()
        rank1 = group.pids()["ranks"][1]
        sent: list[float] = []

        def on_step(step: int, count: int) -> None:
            if step == 1:
                sent.append(time.perf_counter())
                os.kill(rank1, sig)

        try:
            group.submit({"steps": 400, "stepS": 0.05}, on_step=on_step)
        except WorkerGroupError:
            return time.perf_counter() - sent[0]
        raise RuntimeError("the fault was not detected")
    finally:
        group.close()


def server_death(ranks: int) -> float:
    script = textwrap.dedent(
        f"""
        import json, sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        from parallel_overhead import config
        from inline_core.parallel.group import WorkerGroup
        group = WorkerGroup(config({ranks}))
        group.start()
        pids = group.pids()
        print(json.dumps([pids["launcher"], *pids["ranks"].values()]), flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pids: list[int] = json.loads(proc.stdout.readline())
    proc.kill()
    proc.wait()
    began = time.perf_counter()
    running = wait_gone(pids, timeout=60.0, poll_s=0.02)
    if running:
        raise RuntimeError(f"processes {running} outlived the server")
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description="worker group overhead on CPU ranks")
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        kit = build_kit(Path(tmp), "tiny", layouts=("diffusers",))
        zimage = bench_zimage(kit.root, args.ranks, args.jobs)
    collective = bench_collective(args.ranks, args.jobs)
    faults = {
        "killedRankS": round(detect(args.ranks, signal.SIGKILL), 3),
        "stoppedRankS": round(detect(args.ranks, signal.SIGSTOP), 3),
        "serverKilledS": round(server_death(args.ranks), 3),
        "heartbeatTimeoutS": 2.0,
    }
    result = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "loadAverageBefore": [round(x, 2) for x in load_before],
            "loadAverageAfter": [round(x, 2) for x in os.getloadavg()],
        },
        "ranks": args.ranks,
        "backend": "gloo",
        "engine": "cache-dit",
        "jobs": args.jobs,
        "zimageTiny64px4steps": zimage,
        "modelFreeRunner": collective,
        "faultDetection": faults,
        "targets": {"startS": 10.0, "ipcOverheadMs": 5.0},
    }
    rows = [
        ("group ready, tiny Z-Image (s)", zimage["startS"], "<= 10"),
        ("  of which: every rank connected (s)", zimage["ranksConnectedS"], "torch imported"),
        ("group close, tiny Z-Image (s)", zimage["closeS"], ""),
        ("group ready, model-free runner (s)", collective["startS"], ""),
        ("in-process render (ms)", zimage["inProcessMs"], ""),
        ("in-process render, rank threads (ms)", zimage["inProcessRankThreadsMs"], ""),
        ("group round trip (ms)", zimage["roundTripMs"], ""),
        ("rank 0 compute (ms)", zimage["rank0ComputeMs"], ""),
        ("progress/cancel traffic per job (ms)", zimage["controlMs"], "counted as overhead"),
        ("IPC overhead per job (ms, median)", zimage["ipcOverheadMs"], "<= 5"),
        ("IPC overhead per job (ms, min)", zimage["ipcOverheadMinMs"], "<= 5"),
        ("IPC overhead per job (ms, max)", zimage["ipcOverheadMaxMs"], ""),
        ("IPC overhead, model-free job (ms, median)", collective["ipcOverheadMs"], ""),
        ("IPC overhead, model-free job (ms, min)", collective["ipcOverheadMinMs"], ""),
        ("rank SIGKILL -> job error (s)", faults["killedRankS"], ""),
        ("rank SIGSTOP -> job error (s)", faults["stoppedRankS"], "timeout 2 s"),
        ("server SIGKILL -> ranks gone (s)", faults["serverKilledS"], ""),
    ]
    print(f"{'measure':40} {'value':>10}  target")
    for name, value, target in rows:
        print(f"{name:40} {value:>10}  {target}")
    print(f"attention tokens per rank: {zimage['attentionTokensPerRank']}")
    print(f"load average before/after: {load_before} / {os.getloadavg()}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "parallel.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
