"""The split through the real server: `INLINE_PROFILE=cpu INLINE_PARALLEL=ulysses=2` runs Z-Image
renders on two gloo ranks behind `POST /v1/runs`; a split the family cannot run stops the server
from starting; SIGTERM takes the group down with the server."""

from __future__ import annotations

import io
import json
import re
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from live_server import LiveServer
from parallel_support import group_config, wait_gone
from PIL import Image
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect
from zimage_support import kit_handle, load_spec, render_in_process

from inline_core import cli
from inline_core.config import Config
from inline_core.contract.registry import Families
from inline_core.engine.runtime import ModelRuntime
from inline_core.errors import InvalidRequest
from inline_core.families.nodes.register import register_families
from inline_core.families.zimage import NODE_TYPE, ZImageFamily
from inline_core.families.zimage.kit import KitPaths
from inline_core.families.zimage.split import parallel_support, support_for
from inline_core.graph.registry import Registry
from inline_core.models.catalog import Catalog
from inline_core.sampling import StepLoopSampler
from tests.server.server_support import free_port

PARAMS: dict[str, Any] = {
    "width": 64,
    "height": 64,
    "steps": 4,
    "seed": 11,
    "guidance": 1.5,
    "negative_prompt": "blurry",
}


def zimage_graph(prompt: str, **params: Any) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": prompt}},
            {
                "id": "z",
                "type": NODE_TYPE,
                "params": {**PARAMS, **params},
                "inputs": {"prompt": {"from": "p", "output": "text"}},
            },
        ],
    }


def events_until_finished(server: LiveServer, run_id: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    url = f"ws://127.0.0.1:{server.port}/v1/runs/{run_id}/events"
    with connect(url) as ws:
        try:
            while True:
                messages.append(json.loads(ws.recv(timeout=120)))
        except ConnectionClosedOK:
            pass
    return messages


def post_run(server: LiveServer, prompt: str, **params: Any) -> str:
    body = {"graph": zimage_graph(prompt, **params), "target": "z"}
    response = httpx.post(server.base + "/v1/runs", json=body, timeout=30)
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def node_step(server: LiveServer, run_id: str) -> int:
    state: dict[str, Any] = httpx.get(f"{server.base}/v1/runs/{run_id}", timeout=30).json()
    node: dict[str, Any] = state["nodes"].get("z") or {}
    return int(node.get("step") or 0)


@pytest.mark.worker_group
def test_a_split_render_through_the_server_equals_the_in_process_take(
    kit: KitPaths, tmp_path: Path
) -> None:
    server = LiveServer(tmp_path / "data", kit.root, env={"INLINE_PARALLEL": "ulysses=2"})
    server.start()
    try:
        messages = events_until_finished(server, post_run(server, "a lighthouse"))
        assert messages[-1]["type"] == "run_done", (messages[-1], server.log())
        workers = server.group_pids()  # the group stays resident after the run
        assert len(workers) == 3  # torchrun + 2 ranks
        [take] = messages[-1]["takes"]
        png = httpx.get(server.base + take["uri"], timeout=30).content
        got = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        progress = [m for m in messages if m["type"] == "progress" and m["nodeId"] == "z"]
        steps = {m["step"] for m in progress if m["phase"] == "sample" and m["step"]}
        assert steps and steps <= {1, 2, 3, 4}
        assert all(m["stepCount"] == 4 for m in progress if m["step"])
        # A long render is in the ranks when the server is told to stop.
        busy = post_run(server, "a long render", steps=100)
        deadline = time.monotonic() + 60  # a liveness bound, not a timing assertion
        while node_step(server, busy) < 1:
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.05)
    finally:
        code = server.stop(signal.SIGTERM)
    # uvicorn re-raises the signal once its shutdown (ours included) has run to the end.
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in server.log()
    assert wait_gone(workers) == []  # shutdown stopped the group: nothing left behind
    with closing(sqlite3.connect(server.data_dir / "runs.db")) as db:
        row = db.execute("SELECT status FROM runs WHERE id = ?", (busy,)).fetchone()
    assert tuple(row) == ("queued",)  # cancelled through the group, kept for the next start
    # The same render in this process, without a split.
    pipe = load_spec(kit_handle(kit.root).remote_spec())
    expected = render_in_process(pipe, group_config(), prompt="a lighthouse", **PARAMS)
    assert np.array_equal(got, np.asarray(expected.convert("RGB")))


def test_a_split_the_model_cannot_run_stops_the_server_from_starting(
    kit: KitPaths, tmp_path: Path
) -> None:
    server = LiveServer(tmp_path / "data", kit.root, env={"INLINE_PARALLEL": "pipefusion=2"})
    proc = server.launch()
    assert proc.wait(timeout=60) == 2
    lines = [line for line in server.log().splitlines() if line.startswith("inline-core:")]
    # No family installed splits with pipefusion: the first that splits at all names itself and
    # its methods (ulysses, and ring where it rings).
    assert len(lines) == 1 and re.fullmatch(
        r"inline-core: INLINE_PARALLEL=pipefusion=2: [\w.-]+ cannot be split with "
        r"pipefusion; supported methods: ulysses(, ring)?",
        lines[0],
    ), lines


def test_the_multi_gpu_flag_is_checked_the_same_way(
    kit: KitPaths,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("INLINE_PARALLEL", "INLINE_PROFILE", "INLINE_MODELS_DIR", "INLINE_DATA_DIR"):
        monkeypatch.setenv(name, "")  # restored afterwards: the flags write os.environ
    argv = ["--cpu", "--multi-gpu", "ulysses=4", "--models-dir", str(kit.root)]
    argv += ["--port", str(free_port())]  # it binds before the split is checked: never 8848
    assert cli.main([*argv, "--data-dir", str(tmp_path / "data")]) == 2
    assert capsys.readouterr().err.strip() == (
        "inline-core: INLINE_PARALLEL=ulysses=4: a ulysses degree must divide the 2 attention "
        "heads of z-image; allowed ulysses degrees: 2"
    )


@pytest.mark.parametrize(
    ("split", "why"),
    [
        ("ulysses=4", "must divide the 2 attention heads of z-image; allowed ulysses degrees: 2"),
        ("ring=2,pipefusion=2", "cannot be split with pipefusion"),
        ("ulysses=two", "degree 'two' is not an integer"),
    ],
)
def test_registration_refuses_a_split_the_family_cannot_run(
    kit: KitPaths, split: str, why: str
) -> None:
    config = Config(models_dir=kit.root, profile="cpu", dtype="float32", parallel=split)
    catalog = Catalog(kit.root)
    sampler = StepLoopSampler()
    try:
        with pytest.raises(InvalidRequest, match=why):
            families = Families([ZImageFamily(catalog, {})])
            register_families(Registry(), families, catalog, ModelRuntime(config, sampler))
    finally:
        sampler.close()


def test_the_family_declares_its_split_support(kit: KitPaths) -> None:
    turbo = parallel_support()
    assert (turbo.family, turbo.methods, turbo.heads) == ("z-image", {"ulysses", "ring"}, 30)
    assert turbo.ulysses_degrees == (2, 3, 5, 6, 10, 15, 30)
    sampler = StepLoopSampler()
    try:
        for parallel, expected in (("ulysses=2", "ulysses=2"), (None, None), ("off", None)):
            config = Config(models_dir=kit.root, profile="cpu", dtype="float32", parallel=parallel)
            family = ZImageFamily(Catalog(kit.root), {})
            runtime = ModelRuntime(config, sampler)
            transformer = family.files.resolve().require().require("transformer")
            assert support_for(transformer).heads == 2  # read from the tiny transformer's config
            split = runtime.split_for(family, transformer)
            assert (None if split is None else str(split)) == expected
            runtime.close()  # no group was started: nothing to stop
    finally:
        sampler.close()
