"""A primitive graph (what the ComfyUI importer produces) through the real server with
`INLINE_PROFILE=cpu INLINE_PARALLEL=ulysses=2`: its `sample` runs on two gloo ranks (each rank's
attention saw half the tokens), progress and cancel cross into the group, and the takes equal
the in-process takes."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from live_server import LiveServer, started_split_server
from parallel_support import group_config
from PIL import Image
from primitives_support import primitive_graph, render_in_process
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect
from zimage_support import rank_threads

from inline_core.families.zimage.kit import KitPaths, build_kit

JOB_DONE = re.compile(r"worker group job done \(ulysses=2\): engine (\S+), (\d+) forwards, (.*)")


pytestmark = pytest.mark.worker_group  # starts groups of its own


@pytest.fixture(scope="module")
def comfy(tmp_path_factory: pytest.TempPathFactory) -> KitPaths:
    """The tiny stack as ComfyUI single files, named by the primitive loaders."""
    return build_kit(tmp_path_factory.mktemp("comfy") / "models", "tiny", layouts=("comfy",))


@pytest.fixture(scope="module")
def server(comfy: KitPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with started_split_server(tmp_path_factory.mktemp("server") / "data", comfy.root) as live:
        yield live


def _post(server: LiveServer, graph: dict[str, Any]) -> str:
    response = httpx.post(
        server.base + "/v1/runs", json={"graph": graph, "target": "decode"}, timeout=30
    )
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def _events(server: LiveServer, run_id: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    with connect(f"ws://127.0.0.1:{server.port}/v1/runs/{run_id}/events") as ws:
        try:
            while True:
                messages.append(json.loads(ws.recv(timeout=120)))
        except ConnectionClosedOK:
            pass
    return messages


def _take(server: LiveServer, take: dict[str, Any]) -> np.ndarray[Any, Any]:
    png = httpx.get(server.base + str(take["uri"]), timeout=30).content
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def _group_jobs(server: LiveServer) -> list[tuple[str, int, str]]:
    return [
        (m.group(1), int(m.group(2)), m.group(3))
        for m in map(JOB_DONE.search, server.log().splitlines())
        if m is not None
    ]


def test_a_primitive_graph_is_split_and_equals_the_in_process_take(
    comfy: KitPaths, server: LiveServer, tmp_path: Path
) -> None:
    # Guided, another sampler and schedule, a batch of two: every piece of the request crosses.
    graph = primitive_graph(
        "a lighthouse", "blurry", cfg=2.5, sampler="dpmpp_2m", scheduler="karras", batch=2
    )
    jobs_before = len(_group_jobs(server))
    messages = _events(server, _post(server, graph))
    assert messages[-1]["type"] == "run_done", (messages[-1], server.log())
    assert len(server.group_pids()) == 3  # torchrun + 2 ranks, resident after the run
    got = [_take(server, take) for take in messages[-1]["takes"]]
    progress = [m for m in messages if m["type"] == "progress" and m["nodeId"] == "sample"]
    steps = [m for m in progress if m["phase"] == "sample" and m.get("step")]
    # One count over the batch (4 steps for each of 2 items). The history keeps a node's latest
    # progress in place of older ones when its writes fall behind (a loaded machine, a client
    # that connects late), so a client may see some or none of the steps: never a wrong count,
    # never out of order, and always the node's progress.
    assert progress and {m["stepCount"] for m in steps} <= {8}
    counted = [int(m["step"]) for m in steps]
    assert counted == sorted(counted) and set(counted) <= set(range(1, 9))
    # The same graph in this process, without a split. Both step loops batch the two items, but
    # when each joins a forward is the loop's timing: a forward over one sequence or over both
    # may move a pixel by a level (tests/sampling/test_sampling_zimage.py), the split nothing.
    expected, whole = render_in_process(comfy.root, graph, tmp_path, rank_threads(group_config()))
    assert len(got) == len(expected) == 2
    for mine, theirs in zip(got, expected, strict=True):
        assert int(np.abs(mine.astype(np.int16) - theirs.astype(np.int16)).max()) <= 1
    # One group job per batch item, each a real split: the ranks' attention saw half the tokens.
    jobs = _group_jobs(server)[jobs_before:]
    assert whole and max(whole) % 2 == 0
    half = max(whole) // 2
    shards = f"rank 0 attention tokens {half}, rank 1 attention tokens {half}"
    assert jobs == [("cache-dit", 4, shards)] * 2


def test_cancelling_a_primitive_sample_reaches_the_ranks(server: LiveServer) -> None:
    # 4 items of 200 steps, batched in rank 0's loop: long enough to cancel in the middle.
    run_id = _post(server, primitive_graph("a long render", "", steps=200, batch=4))
    deadline = time.monotonic() + 120  # a liveness bound, not a timing assertion
    while True:
        state: dict[str, Any] = httpx.get(f"{server.base}/v1/runs/{run_id}", timeout=30).json()
        node: dict[str, Any] = state["nodes"].get("sample") or {}
        if int(node.get("step") or 0) >= 1:
            break
        assert state["status"] in ("queued", "running") and time.monotonic() < deadline, state
        time.sleep(0.05)
    workers = server.group_pids()
    assert httpx.delete(f"{server.base}/v1/runs/{run_id}", timeout=30).status_code == 200
    messages = _events(server, run_id)
    assert messages[-1]["type"] == "cancelled", messages[-1]
    final = httpx.get(f"{server.base}/v1/runs/{run_id}", timeout=30).json()
    assert final["status"] == "cancelled" and final["nodes"]["sample"]["step"] < 800
    assert server.group_pids() == workers  # the group stays resident
