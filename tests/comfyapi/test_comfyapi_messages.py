"""The messages of a prompt whose socket began following it once it was already running."""

from __future__ import annotations

from typing import Any

from inline_core.server.comfy.messages import PromptMessages
from inline_core.server.comfy.prompt_meta import PromptMeta
from inline_core.server.events import WireEvent
from inline_core.server.run_state import RunRecord, RunStatus

PROMPT: dict[str, Any] = {
    "16": {"class_type": "UNETLoader", "inputs": {}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {}},
    "7": {"class_type": "CLIPTextEncode", "inputs": {}},
    "3": {"class_type": "KSampler", "inputs": {}},
    "9": {"class_type": "SaveImage", "inputs": {}},
}


def followed_late() -> PromptMessages:
    meta = PromptMeta(PROMPT, {}, 1, "client-1", "9", "IMAGE")
    graph = {"nodes": [{"id": f"c{n}"} for n in ("16", "6", "7", "3")]}
    record = RunRecord("run-1", "c3", graph, RunStatus.RUNNING, 0.0, "")
    return PromptMessages(record, meta, lambda _run, _ids: [], lambda: None)


def executing(messages: list[dict[str, Any]]) -> list[str]:
    return [m["data"]["node"] for m in messages if m["type"] == "executing"]


def test_nodes_finished_before_the_socket_followed_are_announced_in_run_order() -> None:
    run = followed_late()
    state = {
        "status": "running",
        "nodes": {
            "c16": {"state": "done"},
            "c6": {"state": "cached"},
            "c7": {"state": "done"},
            "c3": {"state": "running", "step": 1, "stepCount": 4},
        },
    }
    out = run.on_event(WireEvent("snapshot", {"state": state}))
    types = [m["type"] for m in out]
    assert types[:2] == ["execution_start", "execution_cached"]
    assert executing(out) == ["16", "7"]  # the cached one is announced as cached
    cached = [m["data"]["nodes"] for m in out if m["type"] == "execution_cached"]
    assert cached == [[], ["6"]]
    # The sampler goes on live: its progress announces it, once.
    live = run.on_event(
        WireEvent("progress", {"nodeId": "c3", "state": "running", "step": 2, "stepCount": 4})
    )
    assert executing(live) == ["3"]
    finished = [node for m in out if m["type"] == "progress_state" for node in m["data"]["nodes"]]
    assert finished == ["16", "6", "7"]  # each finished once, the sampler not yet
