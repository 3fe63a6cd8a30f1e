from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from graph_harness import Harness, graph, node
from PIL import Image, PngImagePlugin

from inline_core.errors import InvalidRequest
from inline_core.graph.executor import ExecutionResult
from inline_core.media import MediaKind


def _run(h: Harness, size: tuple[int, int], type_: str, params: dict[str, Any]) -> ExecutionResult:
    raw = graph(
        node("src", "input/image", {"asset": h.asset("src", size)}),
        node("op", type_, params, image="src.image"),
    )
    return h.execute(raw, "op")


def _out(result: ExecutionResult) -> Image.Image:
    image = result.outputs["image"]
    assert isinstance(image, Image.Image)
    return image


@pytest.mark.parametrize(
    ("size", "params", "expected"),
    [
        ((400, 200), {"width": 100, "height": 100, "mode": "fit"}, (100, 50)),
        ((200, 400), {"width": 100, "height": 100, "mode": "fit"}, (50, 100)),
        ((100, 50), {"width": 300, "height": 300, "mode": "fit"}, (300, 150)),
        ((400, 200), {"width": 100, "height": 100, "mode": "fill"}, (100, 100)),
        ((400, 200), {"width": 100, "height": 100, "mode": "stretch"}, (100, 100)),
        ((40, 20), {"width": 7, "height": 300, "mode": "stretch", "resample": "nearest"}, (7, 300)),
    ],
)
def test_resize_modes(
    h: Harness, size: tuple[int, int], params: dict[str, Any], expected: tuple[int, int]
) -> None:
    assert _out(_run(h, size, "image/resize", params)).size == expected


def test_fill_crops_the_overflow_evenly(h: Harness) -> None:
    # Left third red, middle blue, right third green; filling a square keeps the middle.
    src = Image.new("RGB", (30, 10), (255, 0, 0))
    src.paste((0, 0, 255), (10, 0, 20, 10))
    src.paste((0, 255, 0), (20, 0, 30, 10))
    path = h.root / "stripes.png"
    src.save(path)
    h.media.paths[("take", "tk_stripes")] = path
    raw = graph(
        node("src", "input/image", {"asset": {"ref": "take", "id": "tk_stripes"}}),
        node(
            "op",
            "image/resize",
            {"width": 10, "height": 10, "mode": "fill", "resample": "nearest"},
            image="src.image",
        ),
    )
    out = _out(h.execute(raw, "op"))
    assert out.size == (10, 10)
    assert out.getcolors() == [(100, (0, 0, 255))]


def test_crop_and_its_take(h: Harness) -> None:
    params = {"x": 10, "y": 5, "width": 20, "height": 15}
    result = _run(h, (64, 32), "image/crop", params)
    assert _out(result).size == (20, 15)
    (take,) = result.takes
    assert take.kind == MediaKind.IMAGE
    assert take.node_id == "op" and take.run_id == "run-1"
    data = Path(take.path).read_bytes()
    assert take.hash == "sha256-" + hashlib.sha256(data).hexdigest()
    assert take.params == params
    with Image.open(take.path) as png:
        assert isinstance(png, PngImagePlugin.PngImageFile)
        assert png.size == (20, 15)
        assert json.loads(png.text["inline:params"]) == params
        assert png.text["inline:node"] == "op"


def test_crop_outside_the_image_is_refused_clearly(h: Harness) -> None:
    with pytest.raises(InvalidRequest) as info:
        _run(h, (64, 32), "image/crop", {"x": 50, "y": 0, "width": 20, "height": 10})
    assert info.value.node_id == "op"
    assert "reaches outside the 64x32 image" in info.value.message


def test_flip_and_rotate_move_pixels(h: Harness) -> None:
    src = Image.new("RGB", (3, 2), (0, 0, 0))
    src.putpixel((0, 0), (255, 255, 255))  # top-left marker
    path = h.root / "marker.png"
    src.save(path)
    h.media.paths[("asset", "marker")] = path

    def run(type_: str, params: dict[str, Any]) -> Image.Image:
        raw = graph(
            node("src", "input/image", {"asset": {"ref": "asset", "id": "marker"}}),
            node("op", type_, params, image="src.image"),
        )
        return _out(h.execute(raw, "op"))

    def marker(image: Image.Image) -> tuple[int, int]:
        return next(
            (x, y)
            for y in range(image.height)
            for x in range(image.width)
            if image.getpixel((x, y)) == (255, 255, 255)
        )

    assert marker(run("image/flip", {"direction": "horizontal"})) == (2, 0)
    assert marker(run("image/flip", {"direction": "vertical"})) == (0, 1)
    turned = run("image/rotate", {"degrees": "90"})  # clockwise: top-left goes top-right
    assert turned.size == (2, 3) and marker(turned) == (1, 0)
    assert marker(run("image/rotate", {"degrees": "180"})) == (2, 1)
    assert marker(run("image/rotate", {"degrees": "270"})) == (0, 2)


def test_input_image_converts_to_rgb_and_refuses_non_images(h: Harness) -> None:
    rgba = h.root / "rgba.png"
    Image.new("RGBA", (5, 4), (1, 2, 3, 4)).save(rgba)
    h.media.paths[("asset", "rgba")] = rgba
    raw = graph(node("i", "input/image", {"asset": {"ref": "asset", "id": "rgba"}}))
    result = h.execute(raw, "i")
    image = _out(result)
    assert (image.mode, image.size) == ("RGB", (5, 4))
    assert result.takes == ()

    junk = h.root / "junk.png"
    junk.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    h.media.paths[("asset", "junk")] = junk
    with pytest.raises(InvalidRequest, match="not a readable image") as info:
        h.execute(graph(node("i", "input/image", {"asset": {"ref": "asset", "id": "junk"}})), "i")
    assert info.value.node_id == "i"


def test_image_nodes_are_visible_and_sources_and_primitives_hidden(h: Harness) -> None:
    visible = {d.type for d in h.registry.descriptors() if not d.hidden and d.category == "image"}
    assert visible == {"image/resize", "image/crop", "image/flip", "image/rotate"}
    for hidden in ("input/text", "input/image", "sample", "vae/decode", "load/vae"):
        assert h.registry.descriptor(hidden).hidden
    resize = h.registry.descriptor("image/resize").to_json()
    assert resize["outputKind"] == "image"
    assert [p["name"] for p in resize["params"]] == ["width", "height", "mode", "resample"]
    asset = h.registry.descriptor("input/image").to_json()["params"][0]
    assert asset["widget"] == "media"
