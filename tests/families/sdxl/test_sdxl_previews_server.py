"""SDXL step previews on a run's websocket (ASGI): with ComfyUI's
`vae_approx/taesdxl_decoder.safetensors` present, each preview is the TAESD-XL decoder's
(`"method": "taesd"`); without it, the same run falls back to SDXL's latent-to-RGB factors and
says so in each event. A hires pass previews its steps at its own size. The take is the same
render's, previewed or not."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from test_sdxl_server import sdxl_graph

from inline_core.config import Config
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.server.app import create_app
from tests.families.import_harness import finished
from tests.server.preview_frames import check_previews, decode_frame, post_run_with
from tests.server.preview_frames import socket_messages as messages_of

STEPS = 3  # test_sdxl_server's RENDER


def _client(models: Path, data: Path) -> Iterator[TestClient]:
    config = Config(models_dir=models, data_dir=data, profile="cpu", dtype="float32",
                    min_free_disk_mb=0, preview_size=32)  # fmt: skip
    with TestClient(create_app(config)) as client:
        yield client


@pytest.fixture
def client(sdxl_kit: SDXLKit, tmp_path: Path) -> Iterator[TestClient]:
    yield from _client(sdxl_kit.root, tmp_path / "data")


@pytest.fixture
def without_decoder(sdxl_kit: SDXLKit, tmp_path: Path) -> Iterator[TestClient]:
    """The kit's models without its `vae_approx/` decoder."""
    models = tmp_path / "models"
    shutil.copytree(
        sdxl_kit.root, models, ignore=shutil.ignore_patterns("*diffusers*", "vae_approx")
    )
    yield from _client(models, tmp_path / "data")


def _take(client: TestClient, run_id: str) -> Any:
    state = finished(client, run_id)
    assert state["status"] == "done", state
    (take,) = state["takes"]
    with Image.open(io.BytesIO(client.get(take["uri"]).content)) as image:
        return np.asarray(image.convert("RGB"))


def test_previews_go_through_the_taesdxl_decoder(client: TestClient, sdxl_kit: SDXLKit) -> None:
    graph = sdxl_graph(model=sdxl_kit.checkpoint_name)
    run_id = post_run_with(client, graph, "x", preview="taesd")
    check_previews(messages_of(client, run_id), (32, 32), "taesd", "x", STEPS)
    plain = post_run_with(client, graph, "x", preview="none")
    assert np.array_equal(_take(client, run_id), _take(client, plain))


def test_without_the_decoder_previews_fall_back_to_latent2rgb(
    without_decoder: TestClient, sdxl_kit: SDXLKit
) -> None:
    graph = sdxl_graph(model=sdxl_kit.checkpoint_name)
    run_id = post_run_with(without_decoder, graph, "x", preview="taesd")
    check_previews(messages_of(without_decoder, run_id), (32, 32), "latent2rgb", "x", STEPS)


def test_a_hires_pass_previews_at_its_own_size(client: TestClient, sdxl_kit: SDXLKit) -> None:
    hires: dict[str, Any] = {"hires_width": 96, "hires_height": 64, "hires_steps": 2}
    hires["hires_denoise"] = 0.5
    graph = sdxl_graph(model=sdxl_kit.checkpoint_name, **hires)
    messages = messages_of(client, post_run_with(client, graph, "x", preview="taesd"))
    sizes: dict[int, tuple[int, int]] = {}
    for i, message in enumerate(messages):
        if isinstance(message, bytes):
            event = json.loads(messages[i - 1])
            _type, _format, image = decode_frame(message)
            assert event["method"] == "taesd" and event["stepCount"] == STEPS + 2
            sizes[int(event["step"])] = image.size
    assert sizes[STEPS + 2] == (32, 21)  # the hires pass's 96 x 64, its longest side 32
    assert all(size == (32, 32) for step, size in sizes.items() if step <= STEPS)
