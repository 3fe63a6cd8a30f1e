"""What ComfyUI's API adds to a render: `POST /prompt` to `execution_success` against the same
render through `/v1` (`POST /v1/runs` to `run_done` on the run's socket).

Run by hand: `python bench/comfy_overhead.py [--renders 20]`. It builds the tiny Z-Image kit,
starts a real `python -m inline_core.server` on loopback, warms both paths up, then alternates:
the ComfyUI client (its `/ws` open throughout, as ComfyUI's clients keep it) posts the default
graph's prompt and waits for `execution_success`; the `/v1` client posts the graph that prompt
imports to, with the same size and steps, opens the run's socket and waits for `run_done`. Every
render has its own seed, so none is a cache hit. Then the submissions alone, where the layer's
own work is (checking the prompt, importing it): `POST /prompt` against `POST /v1/runs` of the
graph it imports to, each run cancelled at once. Prints a table and writes
bench/results/comfy_overhead.json. Target (issue 36): the compatibility layer adds at most 5 ms.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from server_process import start_server
from websockets.sync.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "comfy_overhead.json"
sys.path.insert(0, str(ROOT))

from tests.comfyapi.comfy_support import zimage_prompt  # noqa: E402


def comfy_render(base: str, ws: ClientConnection, client_id: str, seed: int) -> float:
    prompt = zimage_prompt(seed=seed, steps=2, size=64)
    start = time.perf_counter()
    answer = httpx.post(
        base + "/prompt", json={"prompt": prompt, "client_id": client_id}, timeout=60
    )
    prompt_id = answer.json()["prompt_id"]
    while True:
        message = ws.recv(timeout=120)
        if isinstance(message, bytes):
            continue
        body = json.loads(message)
        if body["type"] == "execution_success" and body["data"]["prompt_id"] == prompt_id:
            return time.perf_counter() - start
        if body["type"] == "execution_error":
            raise SystemExit(f"the prompt failed: {body}")


def v1_render(base: str, graph: dict[str, Any], target: str, seed: int) -> float:
    graph = copy.deepcopy(graph)
    for node in graph["nodes"]:
        if node["type"] == "sample":
            node["params"]["seed"] = seed
    start = time.perf_counter()
    answer = httpx.post(base + "/v1/runs", json={"graph": graph, "target": target}, timeout=60)
    run_id = answer.json()["runId"]
    with connect(base.replace("http", "ws") + f"/v1/runs/{run_id}/events") as ws:
        while True:
            body = json.loads(ws.recv(timeout=120))
            if body["type"] == "run_done":
                return time.perf_counter() - start
            if body["type"] in ("error", "cancelled"):
                raise SystemExit(f"the run failed: {body}")


def submit_pair(
    base: str, graph: dict[str, Any], target: str, seed: int, comfy_first: bool
) -> tuple[float, float]:
    """How long each path takes to answer a submission; each run is cancelled (and has stopped)
    before the next is posted, so no render competes with a submission."""

    def comfy() -> float:
        prompt = zimage_prompt(seed=seed, steps=2, size=64)
        start = time.perf_counter()
        answer = httpx.post(base + "/prompt", json={"prompt": prompt}, timeout=60)
        took = time.perf_counter() - start
        httpx.delete(f"{base}/v1/runs/{answer.json()['prompt_id']}", timeout=60)
        return took

    def v1() -> float:
        posted = copy.deepcopy(graph)
        for node in posted["nodes"]:
            if node["type"] == "sample":
                node["params"]["seed"] = seed + 1
        start = time.perf_counter()
        answer = httpx.post(base + "/v1/runs", json={"graph": posted, "target": target}, timeout=60)
        took = time.perf_counter() - start
        httpx.delete(f"{base}/v1/runs/{answer.json()['runId']}", timeout=60)
        return took

    if comfy_first:
        first = comfy()
        return first, v1()
    second = v1()
    return comfy(), second


def layer_work(models: Path, data: Path, repeats: int) -> dict[str, float]:
    """The layer's own work, in process: checking and importing a prompt (what `POST /prompt`
    does before the ordinary submit) and turning one render's events into ComfyUI's messages."""
    from inline_core.config import Config
    from inline_core.server.bootstrap import build_services
    from inline_core.server.comfy.files import input_names
    from inline_core.server.comfy.messages import PromptMessages
    from inline_core.server.comfy.object_info import Choices
    from inline_core.server.comfy.prompt_meta import META_KEY, PromptMeta
    from inline_core.server.comfy.recipe_defs import served_defs
    from inline_core.server.comfy.submit import imported
    from inline_core.server.comfy.validate import check_prompt, outputs_of, read_prompt
    from inline_core.server.events import WireEvent
    from inline_core.server.run_state import RunRecord, RunStatus

    config = Config(models_dir=models, data_dir=data, profile="cpu", dtype="float32")
    s = build_services(config)
    try:
        defs = served_defs(s.families)
        choices = Choices(s.catalog, s.registry, lambda: input_names(s), defs)
        start = time.perf_counter()
        for _ in range(repeats):
            prompt = read_prompt(zimage_prompt(steps=2, size=64), choices.defs)
            check_prompt(prompt, outputs_of(prompt, None), choices)
            imported(s, prompt, "9")
        check_import_ms = (time.perf_counter() - start) * 1000 / repeats
        prompt = read_prompt(zimage_prompt(steps=2, size=64), choices.defs)
        result = imported(s, prompt, "9")
        meta = PromptMeta(prompt, {}, 1, "bench", "9", "SaveImage")
        graph: dict[str, Any] = {**result.graph.to_json(), "meta": {META_KEY: meta.to_json()}}
        nodes: list[dict[str, Any]] = graph["nodes"]
        record = RunRecord("run_bench", result.target, graph, RunStatus.RUNNING, time.time(), "")
        events = [WireEvent("run_started", {"type": "run_started"})]
        for node in nodes:
            base = {"type": "progress", "nodeId": node["id"], "state": "running"}
            events.append(WireEvent("progress", {**base, "fraction": 0.0}, node["id"]))
            if node["type"] == "sample":
                for step in (1, 2):
                    body = {**base, "step": step, "stepCount": 2, "fraction": step / 2}
                    events.append(WireEvent("progress", body, node["id"]))
            done: dict[str, Any] = {"type": "node_done", "nodeId": node["id"], "takes": []}
            events.append(WireEvent("node_done", done, node["id"]))
        events.append(WireEvent("run_done", {"type": "run_done"}))
        start = time.perf_counter()
        for _ in range(repeats):
            run = PromptMessages(record, meta, lambda _run, _ids: [], lambda: record)
            for event in events:
                run.on_event(event)
        translate_ms = (time.perf_counter() - start) * 1000 / repeats
    finally:
        s.runs.close()
    return {
        "checkAndImportMs": round(check_import_ms, 3),
        "messagesPerRenderMs": round(translate_ms, 3),
        "eventsPerRender": len(events),
    }


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "medianMs": round(statistics.median(ordered) * 1000, 2),
        "p90Ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
        "minMs": round(ordered[0] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--renders", type=int, default=20, help="renders per path")
    parser.add_argument("--submits", type=int, default=50, help="submissions per path")
    parser.add_argument("--repeats", type=int, default=200, help="in-process repeats")
    args = parser.parse_args()
    from inline_core.families.zimage.kit import build_kit

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_kit(root / "models")
        server = start_server(
            root / "models", root / "data", root / "server.log", env={"INLINE_DTYPE": "float32"}
        )
        base = server.base
        try:
            imported = httpx.post(base + "/v1/import/comfy", json=zimage_prompt(steps=2, size=64))
            graph, target = imported.json()["graph"], imported.json()["target"]
            client_id = uuid.uuid4().hex
            with connect(base.replace("http", "ws") + f"/ws?clientId={client_id}") as ws:
                ws.recv(timeout=30)  # the status with our sid
                comfy_render(base, ws, client_id, 1)  # warm-up: models loaded, code paths hot
                v1_render(base, graph, target, 2)
                comfy: list[float] = []
                v1: list[float] = []
                for i in range(args.renders):
                    seed = 1000 + 2 * i
                    if i % 2 == 0:
                        comfy.append(comfy_render(base, ws, client_id, seed))
                        v1.append(v1_render(base, graph, target, seed + 1))
                    else:
                        v1.append(v1_render(base, graph, target, seed + 1))
                        comfy.append(comfy_render(base, ws, client_id, seed))
            submits = [
                submit_pair(base, graph, target, 5000 + 2 * i, i % 2 == 0)
                for i in range(args.submits)
            ]
        finally:
            server.stop()
        work = layer_work(root / "models", root / "work-data", args.repeats)
    pairs = [c - v for c, v in zip(comfy, v1, strict=True)]
    result: dict[str, Any] = {
        "renders": args.renders,
        "render": "Z-Image tiny kit, 64x64, 2 steps, CPU float32",
        "comfyPromptToSuccess": summary(comfy),
        "v1RunToDone": summary(v1),
        "addedMedianMs": round(statistics.median(pairs) * 1000, 2),
        "submits": args.submits,
        "comfySubmit": summary([c for c, _v in submits]),
        "v1Submit": summary([v for _c, v in submits]),
        "submitAddedMedianMs": round(statistics.median([c - v for c, v in submits]) * 1000, 2),
        "layerWork": work,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    print(f"{'path':<34}{'median ms':>12}{'p90 ms':>10}{'min ms':>10}")
    for name, key in (("POST /prompt -> execution_success", "comfyPromptToSuccess"),
                      ("POST /v1/runs -> run_done", "v1RunToDone")):  # fmt: skip
        row = result[key]
        print(f"{name:<34}{row['medianMs']:>12}{row['p90Ms']:>10}{row['minMs']:>10}")
    print(
        f"added by the ComfyUI layer (median of paired differences): {result['addedMedianMs']} ms"
    )
    for name, key in (("POST /prompt answered", "comfySubmit"),
                      ("POST /v1/runs answered", "v1Submit")):  # fmt: skip
        row = result[key]
        print(f"{name:<34}{row['medianMs']:>12}{row['p90Ms']:>10}{row['minMs']:>10}")
    added = result["submitAddedMedianMs"]
    print(f"submission: added by the ComfyUI layer (median of paired differences): {added} ms")
    print(f"the layer's own work: checking and importing a prompt: {work['checkAndImportMs']} ms")
    events, took = work["eventsPerRender"], work["messagesPerRenderMs"]
    print(f"the layer's own work: one render's {events} events as messages: {took} ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
