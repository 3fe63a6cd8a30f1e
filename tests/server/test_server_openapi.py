"""The API's own description, read from a real server: `/docs` loads every asset from the server
itself (no CDN, so it works offline), `/openapi.json` documents each `/v1` answer with its model
and status (submit is 201, `options.cache` is in its body), one error schema stands for every
4xx and 5xx, and the server's actual answers fit the models it documents."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from server_support import post_run, running_server, slow_graph, wait_finished

from inline_core.server import schemas

ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}


def _json_schema(response: dict[str, Any]) -> Any:
    return response.get("content", {}).get("application/json", {}).get("schema")


def test_the_docs_and_the_description(tmp_path: Path) -> None:
    with running_server(tmp_path) as live:
        docs = httpx.get(f"{live.base}/docs", timeout=30)
        assets = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
        fetched = {a: httpx.get(live.base + a, timeout=30).status_code for a in assets}
        spec = httpx.get(f"{live.base}/openapi.json", timeout=30).json()

        response = post_run(live, slow_graph(steps=1, delay=0.0), "s")
        run_id = str(response.json()["runId"])
        run = wait_finished(live, run_id)
        take = httpx.get(f"{live.base}/v1/takes/{run['takes'][0]['id']}", timeout=30).json()
        health = httpx.get(f"{live.base}/v1/health", timeout=30).json()
        listed = httpx.get(f"{live.base}/v1/runs", timeout=30).json()
        missing = httpx.get(f"{live.base}/v1/runs/run_nope", timeout=30)

    assert docs.status_code == 200 and "swagger-ui-bundle.js" in docs.text
    assert assets and all(a.startswith("/") for a in assets), assets  # nothing from elsewhere
    assert set(fetched.values()) == {200}, fetched

    submit = spec["paths"]["/v1/runs"]["post"]
    assert _json_schema(submit["responses"]["201"]) == {"$ref": "#/components/schemas/Submitted"}
    options = _json_schema(submit["requestBody"])["properties"]["options"]["properties"]
    assert options["cache"]["properties"]["method"]["enum"] == ["none", "dbcache"]
    assert spec["paths"]["/v1/assets"]["post"]["responses"].keys() >= {"201", "413", "415"}

    components = spec["components"]["schemas"]
    assert "HTTPValidationError" not in components
    assert components["ErrorEnvelope"]["required"] == ["error"]
    for path, operations in spec["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            responses: dict[str, Any] = operation["responses"]
            assert {"4XX", "5XX"} <= responses.keys(), where
            for status, answer in responses.items():
                if status[0] in "45":
                    assert _json_schema(answer) == ENVELOPE, (where, status)
                elif status[0] == "2" and "application/json" in answer.get("content", {}):
                    assert "$ref" in _json_schema(answer), (where, status)  # not empty

    assert response.status_code == 201
    schemas.Submitted.model_validate(response.json())
    schemas.Run.model_validate(run)
    schemas.Take.model_validate(take)
    schemas.Health.model_validate(health)
    schemas.RunList.model_validate(listed)
    assert missing.status_code == 404
    schemas.ErrorEnvelope.model_validate(missing.json())
