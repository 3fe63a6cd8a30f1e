"""A run's `options` (its step previews) at the API: checked at submit with a 422 naming the
option, stored with the run on both store backends, and `GET /v1/runs/{id}/preview` answering
`no_preview` while a run has none. The server-wide default comes from its flags or environment."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from server_support import slow_graph, text_graph
from store_support import claim, new_run, open_store

from inline_core.cli import apply_serve_args, build_serve_parser
from inline_core.config import Config
from inline_core.errors import InvalidRequest
from inline_core.server.run_options import parse_options, preview_method


def wait_done(client: TestClient, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30.0  # a liveness bound, not a timing assertion
    while True:
        state: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        if state["status"] in ("done", "error", "cancelled"):
            return state
        assert time.monotonic() < deadline, state
        time.sleep(0.01)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"preview": "sharp"}, "option 'preview' is 'sharp'; choose one of none, latent2rgb"),
        ({"preview": 3}, "option 'preview' is 3"),
        ({"previews": "taesd"}, "unknown option 'previews'"),
        ("taesd", "'options' must be an object"),
    ],
)
def test_a_bad_option_is_a_422_naming_it(client: TestClient, options: Any, named: str) -> None:
    body = {"graph": text_graph(), "target": "t", "options": options}
    response = client.post("/v1/runs", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and named in error["message"]
    assert client.get("/v1/runs").json()["runs"] == []  # nothing was stored


def test_options_are_stored_with_the_run_and_its_preview_404s_until_one_exists(
    client: TestClient,
) -> None:
    body = {"graph": slow_graph(steps=2, delay=0.0), "target": "s", "options": {"preview": "taesd"}}
    response = client.post("/v1/runs", json=body)
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]
    assert wait_done(client, run_id)["status"] == "done"
    # test/slow steps no pipeline: there is no preview, and the answer says why it may be.
    missing = client.get(f"/v1/runs/{run_id}/preview")
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["code"] == "no_preview" and "none was rendered" in error["message"]
    unknown = client.get("/v1/runs/run_nope/preview")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"


def test_options_survive_the_store_and_a_claim(tmp_path: Path, database_url: str | None) -> None:
    store = open_store(tmp_path / "data", database_url)
    try:
        new = new_run("run_opts")
        store.insert_run(replace(new, options={"preview": "latent2rgb"}))
        store.insert_run(new_run("run_plain"))
        claimed = {r.id: r for r in claim(store)}
        assert claimed["run_opts"].options == {"preview": "latent2rgb"}
        assert claimed["run_plain"].options == {}
        fetched = store.get_run("run_opts")
        assert fetched is not None and fetched.options == {"preview": "latent2rgb"}
    finally:
        store.close()


def test_the_run_s_option_wins_over_the_server_default() -> None:
    assert parse_options(None) == {} and parse_options({}) == {}
    assert parse_options({"preview": "none"}) == {"preview": "none"}
    assert preview_method({"preview": "none"}, "taesd") == "none"
    assert preview_method({}, "latent2rgb") == "latent2rgb"


def test_preview_settings_from_flags_and_environment() -> None:
    assert (Config.from_env({}).preview_method, Config.from_env({}).preview_size) == ("none", 512)
    env: dict[str, str] = {}
    args: argparse.Namespace = build_serve_parser("inline-core").parse_args(
        ["--preview-method", "taesd", "--preview-size", "256"]
    )
    apply_serve_args(args, env)
    config = Config.from_env(env)
    assert (config.preview_method, config.preview_size) == ("taesd", 256)
    with pytest.raises(InvalidRequest, match="INLINE_PREVIEW_METHOD .* 'blur'; choose one of"):
        Config.from_env({"INLINE_PREVIEW_METHOD": "blur"})
    with pytest.raises(InvalidRequest, match="INLINE_PREVIEW_SIZE .* got 2"):
        Config.from_env({"INLINE_PREVIEW_SIZE": "2"})
    with pytest.raises(SystemExit):
        build_serve_parser("inline-core").parse_args(["--preview-method", "blur"])
