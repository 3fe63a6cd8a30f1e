"""A control render on a server that splits Z-Image across a worker group's ranks
(`INLINE_PARALLEL`) is a 422 at submit saying why, on the Z-Image node and on the primitives'
`load/controlnet` alike, queueing nothing (the split transformer holds a part of the sequence the
control's hints cover). Without a split the same graphs render (`test_control_server`,
`test_control_import`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_zimage import zimage_api
from control_harness import UNION, edges
from fastapi.testclient import TestClient
from test_control_import import import_response, with_control
from test_control_server import graph, refused, upload

from inline_core.config import Config
from inline_core.families.zimage.kit import KitPaths
from inline_core.server.app import create_app

SPLIT = "ulysses=2"


@pytest.fixture
def split_client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    config = Config(
        models_dir=kit.root,
        data_dir=tmp_path / "data",
        profile="cpu",
        dtype="float32",
        parallel=SPLIT,
    )
    with TestClient(create_app(config)) as client:
        yield client


def test_a_control_render_under_a_split_is_refused_at_submit(split_client: TestClient) -> None:
    body = graph(split_client, {"control_image": edges()}, controlnet=UNION, control_strength=0.8)
    error = refused(split_client, body, f"controlnet/{UNION}", "split", "INLINE_PARALLEL")
    assert error["nodeId"] == "z"

    control = upload(split_client, edges())
    workflow = with_control(zimage_api("a red fox", seed=1), 0.8)
    imported = import_response(split_client, workflow, {"edges.png": control["id"]}).json()
    [patch] = [n for n in imported["graph"]["nodes"] if n["type"] == "load/controlnet"]
    submitted = split_client.post(
        "/v1/runs", json={"graph": imported["graph"], "target": imported["target"]}
    )
    assert submitted.status_code == 422, submitted.text
    error: dict[str, Any] = submitted.json()["error"]
    assert error["nodeId"] == patch["id"] and "split" in error["message"]
    assert split_client.get("/v1/runs").json()["runs"] == []  # nothing was queued
