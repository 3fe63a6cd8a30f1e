"""Packs through a real server: served like built-in nodes, mixed in one graph with them, two
pins of one library side by side, and a pack refused at start never half-loaded."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
from PIL import Image, ImageOps

from inline_core_sdk.version import PROTOCOL_VERSION, sdk_version
from tests.packs.pack_support import (
    FIXTURES,
    chain_graph,
    gradient,
    install,
    pack_server,
    packs_listing,
    run_to_end,
    submit,
    take_image,
    upload_image,
)


def env_pillow(packs_dir: Path, pack: str) -> str:
    index = json.loads((packs_dir / "index.json").read_text())
    python = packs_dir / index["packs"][pack]["dir"] / "env" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", "import PIL; print(PIL.__version__)"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    return done.stdout.strip()


def test_two_pillow_pins_and_a_built_in_node_render_one_graph(
    packs_home: Path, tmp_path: Path
) -> None:
    assert env_pillow(packs_home, "pillow10").startswith("10.")
    assert env_pillow(packs_home, "pillow11").startswith("11.")
    source = gradient(24)
    with pack_server(tmp_path, packs_home) as live:
        asset = upload_image(live, source)
        graph = chain_graph(
            asset,
            ("pillow10/invert", {}),
            ("pillow11/posterize", {"bits": 3}),
            ("image/flip", {"direction": "vertical"}),
        )
        state = run_to_end(live, graph, "n3")
        assert state["status"] == "done", state
        by_node = {t["nodeId"]: t for t in state["takes"]}
        assert set(by_node) == {"n1", "n2", "n3"}
        inverted = ImageOps.invert(source)
        posterized = ImageOps.posterize(inverted, 3)
        expected = posterized.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
        assert take_image(live, by_node["n1"]).tobytes() == inverted.tobytes()
        assert take_image(live, by_node["n2"]).tobytes() == posterized.tobytes()
        assert take_image(live, by_node["n3"]).tobytes() == expected.tobytes()
        listing = packs_listing(live)
        assert listing["pillow10"]["status"] == "running"
        assert listing["pillow11"]["status"] == "running"
        assert listing["pillow10"]["nodeTypes"] == ["pillow10/invert"]
        assert listing["pillow10"]["version"] == "1.0.0"
        assert listing["pillow10"]["lastError"] is None


def test_pack_nodes_are_served_namespaced_with_their_pack_as_source(
    packs_home: Path, tmp_path: Path
) -> None:
    with pack_server(tmp_path, packs_home) as live:
        models = httpx.get(live.base + "/v1/models", timeout=10).json()["models"]
        by_type = {m["type"]: m for m in models}
        threshold = by_type["pillow11/threshold"]
        assert threshold["source"] == "pillow11" and threshold["available"] is True
        assert [o["kind"] for o in threshold["outputs"]] == ["mask", "number"]
        assert threshold["params"][0]["name"] == "level"
        assert threshold["pack"] == {"name": "pillow11", "version": "1.0.0"}
        assert by_type["image/flip"]["source"] == "core"
        one = httpx.get(live.base + "/v1/models/pillow10/invert", timeout=10).json()
        assert one["comfy"]["class"] == "ImageInvert"


def test_a_pack_node_is_checked_at_submit_like_a_built_in_one(
    packs_home: Path, tmp_path: Path
) -> None:
    with pack_server(tmp_path, packs_home) as live:
        asset = upload_image(live, gradient())
        too_many_bits = chain_graph(asset, ("pillow11/posterize", {"bits": 9}))
        response = submit(live, too_many_bits, "n1")
        assert response.status_code == 422
        error = response.json()["error"]
        assert error["code"] == "invalid_graph" and error["nodeId"] == "n1"
        assert "'bits' must be at most 8" in error["message"]
        unwired = chain_graph(None, ("pillow10/invert", {}))
        response = submit(live, unwired, "n1")
        assert response.status_code == 422
        assert "required input 'image'" in response.json()["error"]["message"]
        # No worker was started for graphs refused at submit.
        assert packs_listing(live)["pillow11"]["workerStarts"] == 0


def test_a_mask_and_a_number_come_back_from_a_pack(packs_home: Path, tmp_path: Path) -> None:
    source = gradient(20)
    with pack_server(tmp_path, packs_home) as live:
        asset = upload_image(live, source)
        state = run_to_end(live, chain_graph(asset, ("pillow11/threshold", {"level": 100})), "n1")
        assert state["status"] == "done", state
        [take] = state["takes"]
        mask = take_image(live, take)
        expected = source.convert("L").point(lambda v: 255 if v >= 100 else 0)  # pyright: ignore

        assert mask.mode == "L" and mask.tobytes() == expected.tobytes()


def test_a_pack_refused_at_start_is_listed_with_why_and_serves_no_node(tmp_path: Path) -> None:
    packs_dir = tmp_path / "packs"
    install(packs_dir, "hang")
    install(packs_dir, "segv")
    install(packs_dir, "faults")
    index = json.loads((packs_dir / "index.json").read_text())
    hang_manifest = packs_dir / index["packs"]["hang"]["dir"] / "pyproject.toml"
    segv_manifest = packs_dir / index["packs"]["segv"]["dir"] / "pyproject.toml"
    # An environment an older server built: its SDK speaks the protocol before this one.
    faults_described = packs_dir / index["packs"]["faults"]["dir"] / "described.json"
    described = json.loads(faults_described.read_text())
    described.update(sdk="0.9.0", protocol=PROTOCOL_VERSION - 1)
    faults_described.write_text(json.dumps(described))
    # As if the server had been upgraded past the SDK major the pack was built for...
    shutil.copyfile(FIXTURES / "future" / "pyproject.toml", hang_manifest)
    text = hang_manifest.read_text().replace('"future"', '"hang"')
    hang_manifest.write_text(text)
    # ...and a manifest broken by hand.
    segv_manifest.write_text("[project\nname = ")
    with pack_server(tmp_path / "server", packs_dir) as live:
        listing = packs_listing(live)
        assert listing["hang"]["status"] == "refused" and listing["hang"]["nodeTypes"] == []
        assert "built for inline-core-sdk<3,>=2.0" in listing["hang"]["lastError"]
        assert "provides 1." in listing["hang"]["lastError"]
        assert listing["segv"]["status"] == "refused"
        assert "not readable TOML" in listing["segv"]["lastError"]
        assert listing["faults"]["status"] == "refused"
        assert (
            f"inline-core-sdk 0.9.0, which speaks protocol {PROTOCOL_VERSION - 1}; this server "
            f"speaks {PROTOCOL_VERSION}: install the pack again"
        ) in listing["faults"]["lastError"]
        models = httpx.get(live.base + "/v1/models", timeout=10).json()["models"]
        types = {m["type"] for m in models}
        assert not {t for t in types if t.startswith(("hang/", "segv/", "faults/"))}
        response = submit(live, chain_graph(None, ("hang/forever", {})), "n1")
        assert response.status_code == 422
        assert "unknown node type 'hang/forever'" in response.json()["error"]["message"]


def test_packs_listing_without_packs_is_empty(tmp_path: Path) -> None:
    with pack_server(tmp_path, tmp_path / "no-packs") as live:
        body = httpx.get(live.base + "/v1/packs", timeout=10).json()
        assert body["packs"] == []
        assert body["sdk"] == sdk_version() and body["protocol"] == PROTOCOL_VERSION


def test_the_comfy_importer_maps_a_class_a_pack_node_declares(
    packs_home: Path, tmp_path: Path
) -> None:
    source = gradient()
    workflow = {
        "1": {"class_type": "LoadImage", "inputs": {"image": "photo.png"}},
        "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "x"}},
    }
    with pack_server(tmp_path, packs_home) as live:
        asset = upload_image(live, source)
        body = {"workflow": workflow, "assets": {"photo.png": asset}}
        imported = httpx.post(live.base + "/v1/import/comfy", json=body, timeout=30).json()
        types = {n["id"]: n["type"] for n in imported["graph"]["nodes"]}
        assert types == {"c1": "input/image", "c2": "pillow10/invert"}
        assert imported["target"] == "c2" and imported["skipped"] == []
        state = run_to_end(live, imported["graph"], imported["target"])
        assert state["status"] == "done", state
        assert take_image(live, state["takes"][0]).tobytes() == ImageOps.invert(source).tobytes()

        # The UI format: the widget values are positional, named by the pack's declaration.
        body = {"workflow": ui_workflow("PosterizeImage", [3]), "assets": {"photo.png": asset}}
        imported = httpx.post(live.base + "/v1/import/comfy", json=body, timeout=30).json()
        [posterize] = [n for n in imported["graph"]["nodes"] if n["id"] == "c2"]
        assert posterize["type"] == "pillow11/posterize" and posterize["params"] == {"bits": 3}
        state = run_to_end(live, imported["graph"], imported["target"])
        expected = ImageOps.posterize(source, 3)
        assert take_image(live, state["takes"][0]).tobytes() == expected.tobytes()


def ui_workflow(middle: str, widgets: list[object]) -> dict[str, object]:
    """LoadImage -> `middle` -> SaveImage, as ComfyUI's editor saves it."""
    return {
        "nodes": [
            {"id": 1, "type": "LoadImage", "widgets_values": ["photo.png", "image"],
             "outputs": [{"name": "IMAGE", "type": "IMAGE", "links": [1]}]},
            {"id": 2, "type": middle, "widgets_values": widgets,
             "inputs": [{"name": "image", "type": "IMAGE", "link": 1}],
             "outputs": [{"name": "IMAGE", "type": "IMAGE", "links": [2]}]},
            {"id": 3, "type": "SaveImage", "widgets_values": ["x"],
             "inputs": [{"name": "images", "type": "IMAGE", "link": 2}]},
        ],
        "links": [[1, 1, 0, 2, 0, "IMAGE"], [2, 2, 0, 3, 0, "IMAGE"]],
    }
