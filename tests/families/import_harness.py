"""Shared helpers of the families' ComfyUI import tests: ComfyUI's published templates, the
import call, and runs waited on to their takes (an imported graph and the one written by hand,
rendered one after the other)."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import httpx
from fastapi.testclient import TestClient
from PIL import Image

from tests.server.server_support import wait_until

TEMPLATES = resources.files("comfyui_workflow_templates_json") / "templates"


def template(name: str) -> Any:
    return json.loads((TEMPLATES / name).read_text(encoding="utf-8"))


def import_comfy(
    client: TestClient, workflow: Any, models: Mapping[str, str] | None = None, **extra: Any
) -> Any:
    body = {"workflow": workflow, "models": dict(models or {}), **extra}
    return client.post("/v1/import/comfy", json=body)


def finished(client: TestClient, run_id: str, seconds: float = 120) -> dict[str, Any]:
    """The run's state once it ended: done, error or cancelled."""

    def ended() -> dict[str, Any] | None:
        state: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        return state if state["status"] in ("done", "error", "cancelled") else None

    return wait_until(ended, f"run {run_id} to end", timeout=seconds)  # a liveness bound


def takes_of(client: TestClient, graphs: Sequence[tuple[dict[str, Any], str]]) -> list[Any]:
    """Each (graph, target) run to done, its one take. One after the other: two runs in flight
    at once may share some forwards and not others, and a row batched with another differs by a
    few ulps from the same row alone."""
    takes: list[Any] = []
    for graph, target in graphs:
        run = client.post("/v1/runs", json={"graph": graph, "target": target})
        assert run.status_code == 201, run.text
        state = finished(client, str(run.json()["runId"]))
        assert state["status"] == "done", state
        (take,) = state["takes"]
        takes.append(take)
    return takes


def target_of(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """An import's target node, and its graph's nodes by id."""
    nodes = {n["id"]: n for n in body["graph"]["nodes"]}
    return nodes[body["target"]], nodes


def upload_png(client: TestClient | httpx.Client, image: Image.Image) -> str:
    """`image` uploaded as a PNG asset (a workflow's LoadImage file); its asset id."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    response = client.post(
        "/v1/assets", content=buf.getvalue(), headers={"content-type": "image/png"}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
