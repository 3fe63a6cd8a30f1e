"""SDXL has no DiT step cache: a run that asks for step caching (`options.cache`) with an SDXL node
in it is a 422 at submit naming the node, not a render that ignores the ask; `{"method": "none"}`
and no option at all are accepted. Health's family list says which families cache."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from test_sdxl_server import sdxl_graph

from inline_core.families.sdxl.descriptor import NODE_TYPE
from inline_core.families.sdxl.kit import SDXLKit

DBCACHE: dict[str, Any] = {"cache": {"method": "dbcache"}}


def post(client: TestClient, **extra: Any) -> Any:
    graph = sdxl_graph(model=None)
    return client.post("/v1/runs", json={"graph": graph, "target": "x", **extra})


def test_asking_sdxl_for_step_caching_is_refused_at_submit(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    runs_before = client.get("/v1/runs").json()["runs"]
    refused = post(client, options=DBCACHE)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["nodeId"]) == ("invalid_request", "x")
    assert f"node 'x' ({NODE_TYPE}) does not do" in error["message"]
    assert client.get("/v1/runs").json()["runs"] == runs_before  # nothing was queued
    families = {f["name"]: f for f in client.get("/v1/health").json()["models"]["families"]}
    assert families["sdxl"]["stepCache"] == []  # health says SDXL caches nothing
    assert families["z-image"]["stepCache"] == ["dbcache"]


def test_no_option_or_method_none_is_accepted(client: TestClient, sdxl_kit: SDXLKit) -> None:
    for extra in ({}, {"options": {"cache": {"method": "none"}}}):
        accepted = post(client, **extra)
        assert accepted.status_code in (200, 201, 202), accepted.text
