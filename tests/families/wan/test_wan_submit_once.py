"""A Wan run resolves its model files once: the node's one submit check (params against the
inputs wired and the files, its LoRA stack against the model's shapes, the split) reads them from
one resolution, and the same files reach `lower` and the render, so no later step resolves again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_wan_lora_server import with_loras
from test_wan_server import submit, wan_graph

from inline_core.contract.sources import Resolution
from inline_core.families.wan import WanFamily
from inline_core.families.wan.kit import WanKit


def test_a_wan_run_with_loras_resolves_its_files_once(
    client: TestClient, wan_kit: WanKit, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = WanFamily.resolve
    calls: list[str | None] = []

    def counted(self: WanFamily, node_type: str, params: Mapping[str, Any]) -> Resolution:
        calls.append(self.model_param(node_type, params))
        return real(self, node_type, params)

    monkeypatch.setattr(WanFamily, "resolve", counted)
    named = [(wan_kit.loras["b"].name, 1.0)]
    state = submit(client, with_loras(wan_graph(format="png"), named))
    assert state["status"] == "done", state
    assert state["takes"][0]["params"]["loras"] == [{"name": named[0][0], "strength": 1.0}]
    assert len(calls) == 1, calls
