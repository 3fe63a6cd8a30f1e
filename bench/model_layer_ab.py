"""The model layer's bill: this checkout against an earlier one, the same benches side by side.

    git worktree add /tmp/before 2c09ed6   # the code before the shared model layer
    .venv/bin/python bench/model_layer_ab.py --before /tmp/before [--rounds 2]

Runs, for each measure, this checkout ("after") and the other one ("before") in turn - after,
before, after, before - so both see the same machine load (this machine is shared), each as its
own process from its own tree (`PYTHONPATH=<tree>/src`, this environment's interpreter), all on one
tiny-model kit built once:
- the tiny render's server path over a bare `ZImagePipeline` call (`zimage_server_vs_pipeline.py
  --sizes tiny`: `serverPathMedianMs`, the render minus the time inside the pipeline's calls, and
  `addedMs`; target <= 15 ms);
- the mid-size render's server / pipeline ratio (`--sizes mid`; target <= 1.05);
- batching on / off at 16 concurrent tiny renders through the server (`batching.py`; >= 1.5x);
- the worker group's IPC overhead per job (`parallel_overhead.py`; <= 5 ms).
Each figure is the median over the rounds; "after / before" is the ratio of those medians. Prints a
table and writes bench/results/model_layer_ab.json (the benches' own JSON included).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "model_layer_ab.json"
Extract = Callable[[dict[str, Any]], float]


@dataclass(frozen=True)
class Measure:
    name: str
    args: tuple[str, ...]  # the bench and its arguments ({models}, {out} filled in)
    result: str  # where the bench leaves its JSON, relative to the tree ({out}: the given file)
    extract: dict[str, Extract]  # figure name -> how to read it from the JSON
    targets: dict[str, str]


def _row(case: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda data: next(r for r in data["rows"] if r["case"] == case)


def _batching(data: dict[str, Any]) -> dict[str, Any]:
    return max(data["rows"], key=lambda r: r["n"])


MEASURES = (
    Measure(
        "tiny render",
        ("bench/zimage_server_vs_pipeline.py", "--sizes", "tiny", "--renders", "10"),
        "bench/results/zimage.json",
        {
            "server path ms": lambda d: _row("tiny")(d)["serverPathMedianMs"],
            "added ms": lambda d: _row("tiny")(d)["addedMs"],
        },
        {"server path ms": "<= 15", "added ms": "<= 15"},
    ),
    Measure(
        "mid render",
        ("bench/zimage_server_vs_pipeline.py", "--sizes", "mid", "--renders", "6"),
        "bench/results/zimage.json",
        {"server / pipeline": lambda d: _row("mid")(d)["ratio"]},
        {"server / pipeline": "<= 1.05"},
    ),
    Measure(
        "batching x16",
        ("bench/batching.py", "--cases", "tiny", "--concurrency", "16", "--paths", "server"),
        "{out}",
        {"on / off img/s": lambda d: _batching(d)["throughputRatio"]},
        {"on / off img/s": ">= 1.5"},
    ),
    Measure(
        "worker group",
        ("bench/parallel_overhead.py", "--jobs", "20"),
        "bench/results/parallel.json",
        {
            "ipc ms / job": lambda d: d["zimageTiny64px4steps"]["ipcOverheadMs"],
            "model-free ipc ms": lambda d: d["modelFreeRunner"]["ipcOverheadMs"],
        },
        {"ipc ms / job": "<= 5"},
    ),
)


def run_side(tree: Path, measure: Measure, models: Path, scratch: Path) -> dict[str, Any]:
    out = scratch / f"{measure.name.replace(' ', '_')}-{time.monotonic_ns()}.json"
    args = list(measure.args)
    if "--sizes" in args or measure.result == "{out}":
        args += ["--models", str(models)]
    if measure.result == "{out}":
        args += ["--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(f"{measure.name} in {tree} failed:\n{done.stdout[-3000:]}{done.stderr}")
    result = out if measure.result == "{out}" else tree / measure.result
    return cast(dict[str, Any], json.loads(result.read_text()))


def commit(tree: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True)
    return done.stdout.strip()


def build_models(root: Path) -> Path:
    from inline_core.families.zimage.kit import build_kit

    for size in ("tiny", "mid"):
        if not (root / "diffusion_models" / f"zimage_{size}_diffusers").exists():
            build_kit(root, size, layouts=("diffusers",))
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description="this checkout against an earlier one")
    parser.add_argument("--before", type=Path, required=True, help="a checkout of earlier code")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--models", type=Path, default=None, help="reuse a kit folder")
    parser.add_argument("--only", default="", help="comma-separated measure names")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    before = cast(Path, args.before).resolve()
    if not (before / "bench" / "zimage_server_vs_pipeline.py").exists():
        parser.error(f"{before} is not a checkout of this project")
    scratch = Path(tempfile.mkdtemp(prefix="model-layer-ab-"))
    models = build_models(cast(Path | None, args.models) or scratch / "models")
    only = {n.strip() for n in str(args.only).split(",") if n.strip()}
    trees = {"after": ROOT, "before": before}
    load_before = os.getloadavg()
    report: list[dict[str, Any]] = []
    for measure in MEASURES:
        if only and measure.name not in only:
            continue
        runs: dict[str, list[dict[str, Any]]] = {"after": [], "before": []}
        for round_ in range(cast(int, args.rounds)):
            for side, tree in trees.items():
                print(f"{measure.name}: {side}, round {round_ + 1}", flush=True)
                runs[side].append(run_side(tree, measure, models, scratch))
        for figure, extract in measure.extract.items():
            values = {side: [extract(r) for r in rs] for side, rs in runs.items()}
            medians = {side: statistics.median(v) for side, v in values.items()}
            ratio = medians["after"] / medians["before"] if medians["before"] else float("nan")
            report.append(
                {
                    "measure": measure.name,
                    "figure": figure,
                    "after": medians["after"],
                    "before": medians["before"],
                    "afterOverBefore": round(ratio, 3),
                    "target": measure.targets.get(figure, ""),
                    "values": values,
                }
            )
        report[-1]["runs"] = runs
    print(f"\n{'measure':14} {'figure':20} {'after':>9} {'before':>9} {'a/b':>7}  target")
    for row in report:
        print(
            f"{row['measure']:14} {row['figure']:20} {row['after']:9.2f} {row['before']:9.2f}"
            f" {row['afterOverBefore']:7.3f}  {row['target']}"
        )
    out = cast(Path, args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "commits": {side: commit(tree) for side, tree in trees.items()},
        "before": str(before),
        "rounds": args.rounds,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadAverageBefore": load_before,
        "loadAverageAfter": os.getloadavg(),
    }
    out.write_text(json.dumps({"meta": meta, "rows": report}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
