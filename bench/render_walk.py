"""The walk from `POST /v1/runs` to a take: which of the project's modules a render runs through.

    .venv/bin/python bench/render_walk.py [--renders 3] [--timed 20]
    PYTHONPATH=/tmp/before/src .venv/bin/python bench/render_walk.py   # another checkout's code

One server in process (the ASGI app through `TestClient`, CPU, float32) over the Z-Image kit's
tiny files (ComfyUI's layout). Each render is a prompt graph onto `alibaba/z-image` with a new
seed, and one more after them a new prompt too (`change`: first, seed, prompt): it is posted, its
state polled until done, and its take's bytes read. A profile hook on every thread
(`sys.setprofile` and `threading.setprofile`) records each `inline_core` module whose code ran
between the POST and the take's bytes. The first render loads the models; later ones are the
warm walk a user pays on every render. Then `--timed` more warm renders run without the hook,
waited on through the run's events socket (no polls), on a second server started after the hook
is gone, each timed: its wall time and the process's CPU time (every thread's, the client's
included), whose medians are the render's cost on this machine (run two checkouts in turn to
compare them). Five more on the hooked server count the Python function calls a warm render
makes on every thread (a background thread's included): a figure the machine's load cannot move.
Prints the counts per package and the timings, and writes bench/results/render_walk.json with the
module lists, so two checkouts can be compared: `--against` another run's JSON prints, for each
warm change, the modules gone from its walk and those new to it. The modules are those of the
`inline_core` actually imported (the first on `PYTHONPATH`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "render_walk.json"


def module_of(filename: str, source: str) -> str | None:
    """`inline_core.a.b` for a file under the package's source folder `source`, else None."""
    if not filename.startswith(source):
        return None
    relative = Path(filename).relative_to(source).with_suffix("")
    parts = [p for p in relative.parts if p != "__init__"]
    return ".".join(("inline_core", *parts))


class Recorder:
    """Every project module whose functions are called on any thread while `active`. The hook is
    installed before the server starts, so every thread it starts carries it (Python 3.11 cannot
    reach threads that already run)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.active = False
        self.seen: set[str] = set()
        self.calls = 0  # Python function calls (any code's) while active
        self._names: dict[str, str | None] = {}

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not self.active:
            return
        self.calls += 1
        filename = frame.f_code.co_filename
        if filename not in self._names:
            self._names[filename] = module_of(filename, self.source)
        name = self._names[filename]
        if name is not None:
            self.seen.add(name)

    @contextmanager
    def installed(self) -> Generator[None]:
        profile: Callable[..., Any] = self.hook
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]  # None removes the hook

    @contextmanager
    def recording(self) -> Generator[set[str]]:
        self.seen = set()
        self.calls = 0
        self.active = True
        try:
            yield self.seen
        finally:
            self.active = False


def prompt_graph(node_type: str, params: dict[str, Any], text: str = "a fox") -> dict[str, Any]:
    """A prompt -> the family node (the kit's one model of each part is picked by default).
    Written out here, not imported from the tests, so the bench runs on older checkouts too."""
    prompt = {"id": "p", "type": "input/text", "params": {"text": text}}
    node = {
        "id": "z",
        "type": node_type,
        "params": params,
        "inputs": {"prompt": {"from": "p", "output": "text"}},
    }
    return {"schemaVersion": 1, "nodes": [prompt, node]}


FINISHED = ("done", "error", "cancelled")


def render(
    client: Any, node_type: str, seed: int, *, socket: bool = False, prompt: str = "a fox"
) -> None:
    """One render: posted, waited on until done (its state polled, or with `socket` its events
    socket read until the run ends: no polls, so the same work whatever the render's length),
    its take's bytes read."""
    params = {"width": 64, "height": 64, "steps": 2, "seed": seed}
    response = client.post(
        "/v1/runs", json={"graph": prompt_graph(node_type, params, prompt), "target": "z"}
    )
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]
    if socket:
        with client.websocket_connect(f"/v1/runs/{run_id}/events") as events:
            first = events.receive_json()  # the snapshot: the run may have ended already
            ended = first["state"]["status"] in FINISHED
            while not ended:
                ended = events.receive_json()["type"] in ("run_done", *FINISHED)
    deadline = time.monotonic() + 600  # a liveness bound: a stuck run fails the bench
    while (state := client.get(f"/v1/runs/{run_id}").json())["status"] not in FINISHED:
        assert time.monotonic() < deadline, f"run {run_id} did not end: {state}"
        time.sleep(0.01)
    assert state["status"] == "done", state
    take = state["takes"][0]["id"]
    assert client.get(f"/v1/takes/{take}/bytes").status_code == 200


def by_package(modules: set[str]) -> dict[str, int]:
    """Module counts per first-level package (`inline_core.<package>`)."""
    counts: dict[str, int] = {}
    for name in modules:
        parts = name.split(".")
        package = parts[1] if len(parts) > 2 else "(top)"
        counts[package] = counts.get(package, 0) + 1
    return dict(sorted(counts.items()))


def compare(walks: list[dict[str, Any]], earlier: list[dict[str, Any]]) -> None:
    """Each warm walk's modules against the same render's in another run: gone and new."""
    for walk, other in zip(walks[1:], earlier[1:], strict=False):
        mine, theirs = set(walk["moduleList"]), set(other["moduleList"])
        print(
            f"render {walk['render']} ({walk['change']}): {len(theirs)} -> {len(mine)}; "
            f"gone: {', '.join(sorted(theirs - mine)) or 'none'}; "
            f"new: {', '.join(sorted(mine - theirs)) or 'none'}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description="The walk from POST /v1/runs to a take.")
    parser.add_argument(
        "--renders",
        type=int,
        default=3,
        help="new-seed renders, the first included (a new prompt follows)",
    )
    parser.add_argument("--timed", type=int, default=20, help="warm renders timed, unhooked")
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--against", type=Path, default=None, help="another run's JSON")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch
    from fastapi.testclient import TestClient

    import inline_core
    from inline_core.config import Config
    from inline_core.families.zimage.descriptor import NODE_TYPE
    from inline_core.families.zimage.kit import build_kit
    from inline_core.server.app import create_app

    source = str(Path(inline_core.__file__).resolve().parent)
    # One intra-op thread by default: on a shared machine a descheduled OpenMP worker stalls
    # every parallel region, and the timings measure the server's path, not torch's threads.
    torch.set_num_threads(int(args.threads))
    scratch = Path(tempfile.mkdtemp(prefix="render-walk-"))
    build_kit(scratch / "models", layouts=("comfy",))
    config = Config(
        models_dir=scratch / "models", data_dir=scratch / "data", profile="cpu", dtype="float32"
    )
    walks: list[dict[str, Any]] = []
    recorder = Recorder(source)
    with recorder.installed(), TestClient(create_app(config)) as client:
        # A new seed each render; the last warm one changes the prompt too (a new encode).
        for index in range(int(args.renders) + 1):
            change = "first" if index == 0 else "seed"
            prompt = "a fox"
            if index == int(args.renders):
                change, prompt = "prompt", "a fox in the snow"
            started = time.perf_counter()
            with recorder.recording() as seen:
                render(client, NODE_TYPE, 100 + index, prompt=prompt)
            seconds = time.perf_counter() - started
            packages = by_package(seen)
            walks.append(
                {
                    "render": index + 1,
                    "change": change,
                    "seconds": round(seconds, 3),
                    "modules": len(seen),
                    "packages": len(packages),
                    "perPackage": packages,
                    "moduleList": sorted(seen),
                }
            )
        calls: list[int] = []
        for index in range(int(args.timed) and 5):  # Python calls: a figure load cannot move
            with recorder.recording():
                render(client, NODE_TYPE, 500 + index, socket=True)
            calls.append(recorder.calls)
    wall_ms: list[float] = []
    cpu_ms: list[float] = []
    # A server of its own, started after the hook is gone: its threads carry none.
    with TestClient(create_app(config)) as client:
        for index in range(int(args.timed) + 2):  # the first two load and warm up
            wall, cpu = time.perf_counter(), time.process_time()
            render(client, NODE_TYPE, 1000 + index, socket=True)
            if index >= 2:
                cpu_ms.append((time.process_time() - cpu) * 1000)
                wall_ms.append((time.perf_counter() - wall) * 1000)
    timed = {
        "renders": len(wall_ms),
        "pythonCallsMedian": statistics.median(calls) if calls else None,
        "pythonCalls": calls,
        "wallMedianMs": round(statistics.median(wall_ms), 2) if wall_ms else None,
        "cpuMedianMs": round(statistics.median(cpu_ms), 2) if cpu_ms else None,
        "wallMs": [round(v, 2) for v in wall_ms],
        "cpuMs": [round(v, 2) for v in cpu_ms],
        "loadAverage": list(os.getloadavg()),
    }
    print(f"{'render':>6} {'change':>7} {'modules':>8} {'packages':>9}")
    for walk in walks:
        print(f"{walk['render']:>6} {walk['change']:>7} {walk['modules']:>8} {walk['packages']:>9}")
    last = walks[-2]  # the last seed change
    print("warm walk per package:", ", ".join(f"{k} {v}" for k, v in last["perPackage"].items()))
    if wall_ms:
        print(
            f"{len(wall_ms)} warm renders unhooked: median {timed['wallMedianMs']} ms wall, "
            f"{timed['cpuMedianMs']} ms CPU (load {os.getloadavg()[0]:.1f}); "
            f"{timed['pythonCallsMedian']} Python calls a render (median of {len(calls)})"
        )
    if args.against is not None:
        compare(walks, json.loads(Path(args.against).read_text())["walks"])
    out = cast(Path, args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = {"source": source, "walks": walks, "timed": timed}
    out.write_text(json.dumps(body, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
