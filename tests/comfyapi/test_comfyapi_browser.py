"""ComfyUI's own frontend in a real browser (Debian's chromium driven by Playwright): it boots on
`/` without errors from our routes, its default graph renders on the tiny Z-Image models and the
image appears; the official Wan text-to-video template, loaded and queued the same way, gives a
video. One browser and one server for the module; screenshots go to INLINE_TEST_SCREENSHOTS."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tests.server.server_support import LiveServer

playwright = pytest.importorskip("playwright.sync_api")

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
# What ComfyUI itself answers 404 for on a fresh install: no user stylesheet, no custom templates.
EXPECTED_404 = ("/user.css", "/api/userdata/user.css", "/api/userdata/comfy.templates.json")
SET_WIDGET = """([id, name, value]) => {
  const node = window.app.graph.getNodeById(id);
  const widget = node.widgets.find((w) => w.name === name);
  widget.value = value;
  return widget.value;
}"""
OPTIONS = """([id, name]) => window.app.graph.getNodeById(id).widgets
  .find((w) => w.name === name).options.values"""
NODES = "() => window.app.graph._nodes.map((n) => [n.id, n.type])"
RENDER_S = 300  # a liveness bound for a render on a busy CPU, not a timing assertion


def chromium() -> str:
    found = os.environ.get("INLINE_TEST_CHROMIUM") or shutil.which("chromium")
    if found is None:
        reason = "Debian's chromium is not installed (scripts/ensure-chromium.sh installs it)"
        if os.environ.get("INLINE_TEST_REQUIRE_CHROMIUM") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def live(kit_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("comfy-browser")
    server = LiveServer(data_dir=root / "data", models_dir=kit_models, name="browser")
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Page:
    """A page of the web UI that records what went wrong and the socket's messages."""

    def __init__(self, browser: Any, live: LiveServer) -> None:
        self.live = live
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.messages: list[dict[str, Any]] = []
        self.page.on("response", self._response)
        self.page.on("console", self._console)
        self.page.on("websocket", self._socket)

    def _response(self, response: Any) -> None:
        if response.status >= 400 and response.url.startswith(self.live.base):
            self.failed.append(response.url[len(self.live.base) :].split("?")[0])

    def _console(self, message: Any) -> None:
        if message.type == "error" and "Failed to load resource" not in message.text:
            self.errors.append(message.text)

    def _socket(self, socket: Any) -> None:
        socket.on("framereceived", self._frame)

    def _frame(self, payload: Any) -> None:
        if isinstance(payload, str):
            self.messages.append(json.loads(payload))

    def boot(self) -> dict[str, int]:
        self.page.goto(self.live.base + "/")
        self.page.wait_for_function(
            "() => window.app && window.app.graph && window.app.graph._nodes.length > 0",
            timeout=RENDER_S * 1000,
        )
        return {kind: node_id for node_id, kind in self.page.evaluate(NODES)}

    def set(self, node: int, name: str, value: Any) -> None:
        assert self.page.evaluate(SET_WIDGET, [node, name, value]) == value

    def options(self, node: int, name: str) -> list[str]:
        return list(self.page.evaluate(OPTIONS, [node, name]))

    def queue(self) -> dict[str, Any]:
        """Queue the graph as the Run button does; the prompt's `executed` message."""
        self.messages.clear()
        self.page.evaluate("() => window.app.queuePrompt(0, 1)")
        self.page.wait_for_function(
            "() => window.app.nodeOutputs && Object.keys(window.app.nodeOutputs).length > 0",
            timeout=RENDER_S * 1000,
        )
        for _ in range(RENDER_S * 10):  # then its last message: `executing` with node null
            if any(m["type"] == "executing" and m["data"]["node"] is None for m in self.messages):
                break
            self.page.wait_for_timeout(100)
        executed = [m["data"] for m in self.messages if m["type"] == "executed"]
        assert executed, [m["type"] for m in self.messages]
        return executed[-1]

    def shot(self, name: str, tmp: Path) -> Path:
        self.page.evaluate(
            "() => { const c = window.app.canvas; c.ds.scale = 0.7; c.ds.offset = [0, 40]; "
            "c.setDirty(true, true); }"
        )
        self.page.wait_for_timeout(500)
        path = tmp / f"{name}.png"
        self.page.screenshot(path=str(path))
        wanted = os.environ.get("INLINE_TEST_SCREENSHOTS")
        if wanted:
            Path(wanted).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(wanted) / path.name)
        return path


def test_the_default_graph_renders_and_the_image_appears(
    browser: Any, live: LiveServer, tmp_path: Path
) -> None:
    page = Page(browser, live)
    ids = page.boot()
    assert {"UNETLoader", "CLIPLoader", "VAELoader", "KSampler", "SaveImage"} <= set(ids)
    assert not page.errors, page.errors
    assert set(page.failed) <= set(EXPECTED_404), page.failed
    # What a person does on a fresh server: pick the models here, make it small for a CPU.
    page.set(ids["UNETLoader"], "unet_name", "zimage_tiny.safetensors")
    page.set(ids["CLIPLoader"], "clip_name", "zimage_tiny_qwen3")
    page.set(ids["VAELoader"], "vae_name", "zimage_tiny_vae.safetensors")
    page.set(ids["EmptySD3LatentImage"], "width", 64)
    page.set(ids["EmptySD3LatentImage"], "height", 64)
    page.set(ids["KSampler"], "steps", 3)
    executed = page.queue()
    assert executed["node"] == str(ids["SaveImage"])
    (image,) = executed["output"]["images"]
    assert image["filename"].endswith(".png")
    types = [m["type"] for m in page.messages]
    assert "execution_success" in types and types[-1] == "executing"
    shown = page.page.evaluate(
        "async (src) => { const i = new Image(); i.src = src; await i.decode(); "
        "return [i.naturalWidth, i.naturalHeight]; }",
        f"/api/view?filename={image['filename']}&type=output&subfolder=",
    )
    assert shown == [64, 64]
    page.shot("default-graph-zimage", tmp_path)
    assert not page.errors, page.errors
    assert set(page.failed) <= set(EXPECTED_404), page.failed


def test_the_wan_template_gives_a_video(browser: Any, live: LiveServer, tmp_path: Path) -> None:
    page = Page(browser, live)
    page.boot()
    template = resources.files("comfyui_workflow_templates_json") / "templates"
    workflow = json.loads((template / "text_to_video_wan.json").read_text(encoding="utf-8"))
    page.page.evaluate("(w) => window.app.loadGraphData(w)", workflow)
    ids = {kind: node_id for node_id, kind in page.page.evaluate(NODES)}
    page.set(ids["UNETLoader"], "unet_name", "wan2.1_t2v_tiny_fp32.safetensors")
    page.set(ids["CLIPLoader"], "clip_name", "umt5_tiny_fp32.safetensors")
    page.set(ids["VAELoader"], "vae_name", "wan_2.1_vae_tiny.safetensors")
    page.set(ids["EmptyHunyuanLatentVideo"], "width", 64)
    page.set(ids["EmptyHunyuanLatentVideo"], "height", 64)
    page.set(ids["EmptyHunyuanLatentVideo"], "length", 9)
    page.set(ids["KSampler"], "steps", 2)
    samplers = page.options(ids["KSampler"], "sampler_name")
    # The template's uni_pc, where the samplers offer it; otherwise the UniPC variant offered.
    page.set(ids["KSampler"], "sampler_name", "uni_pc" if "uni_pc" in samplers else "uni_pc_bh2")
    executed = page.queue()
    assert executed["node"] == str(ids["SaveVideo"])
    (video,) = executed["output"]["images"]
    assert video["filename"].endswith(".mp4") and executed["output"]["animated"] == [True]
    head = page.page.evaluate(
        "async (src) => { const r = await fetch(src); "
        "return [r.status, r.headers.get('content-type')]; }",
        f"/api/view?filename={video['filename']}&type=output&subfolder=",
    )
    assert head == [200, "video/mp4"]
    page.shot("wan-template-video", tmp_path)
    assert not page.errors, page.errors
    assert set(page.failed) <= set(EXPECTED_404), page.failed
