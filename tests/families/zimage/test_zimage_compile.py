"""A Z-Image render through the HTTP API on a server whose setting compiles (`compile=True`, as
`--compile` / `INLINE_COMPILE` set it): the transformer's and the VAE decoder's blocks run
compiled, the take equals the eager server's take within a level and says it ran compiled, and
health shows the compiled blocks warm.

Compiles the tiny transformer's and VAE decoder's blocks once (shared with tests/diffusion's
compile tests when they run in one process; minutes on a loaded CPU when inductor's cache is
cold, seconds with it kept)."""

from __future__ import annotations

import io
import os
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from torch._inductor.runtime.cache_dir_utils import default_cache_dir
from zimage_harness import Pixels, max_diff, pixels

from inline_core.config import Config
from inline_core.diffusion.compile.cache import CACHE_VARIABLE
from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.kit import KitPaths
from inline_core.server.app import create_app
from tests.server.server_support import FINISHED, prompt_graph, wait_until
from tests.worker_groups import XDIST_INDUCTOR

# On the xdist worker of the other module that compiles the same blocks: one cold compile.
pytestmark = pytest.mark.xdist_group(XDIST_INDUCTOR)

# A liveness bound, not a timing test: a cold compile on a loaded CPU takes minutes.
COMPILE_BOUND_S = 900.0


@contextmanager
def server(kit: KitPaths, data: Path, **settings: Any) -> Generator[TestClient]:
    config = Config(models_dir=kit.root, data_dir=data, profile="cpu", dtype="float32", **settings)
    with TestClient(create_app(config)) as client:
        yield client


def render(client: TestClient) -> tuple[dict[str, Any], Pixels]:
    graph = prompt_graph(
        NODE_TYPE, "z", {"width": 64, "height": 64, "steps": 4, "seed": 11}, "a fox"
    )
    response = client.post("/v1/runs", json={"graph": graph, "target": "z"})
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]

    def ended() -> dict[str, Any] | None:
        state = cast(dict[str, Any], client.get(f"/v1/runs/{run_id}").json())
        return state if state["status"] in FINISHED else None

    state = wait_until(ended, f"run {run_id}", timeout=COMPILE_BOUND_S)
    assert state["status"] == "done", state
    [take] = state["takes"]
    with Image.open(io.BytesIO(client.get(take["uri"]).content)) as png:
        return take, pixels(png)


def test_a_compiling_server_renders_the_eager_take(
    kit: KitPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inductor's own default folder, kept between runs of the suite (not the tmp data folder).
    monkeypatch.setenv(CACHE_VARIABLE, os.environ.get(CACHE_VARIABLE) or default_cache_dir())
    with server(kit, tmp_path / "eager") as client:
        eager_take, expected = render(client)
    assert "compile" not in eager_take["params"]  # the CPU's policy keeps compile off
    with server(kit, tmp_path / "compiled", compile=True) as client:
        take, got = render(client)
        health = cast(dict[str, Any], client.get("/v1/health").json())
    assert max_diff(got, expected) <= 1
    ran = {note["block"]: note["ran"] for note in take["params"]["compile"]}
    blocks_run = ("ZImageTransformerBlock", "UNetMidBlock2D", "UpDecoderBlock2D")
    assert ran == dict.fromkeys(blocks_run, "compiled")
    compiled = health["models"]["residency"]["compile"]
    blocks = {entry["block"]: entry for entry in compiled["blocks"]}
    for name in ran:
        assert blocks[name]["state"] == "warm" and blocks[name]["compiledCalls"] > 0
        assert blocks[name]["graphs"] <= blocks[name]["recompileLimit"]
    models = {model["model"] for model in compiled["models"]}
    assert any(name.startswith("Z-Image") for name in models)
    assert "Z-Image vae decoder" in models
