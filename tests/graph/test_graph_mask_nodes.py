"""The mask nodes through the registry and the executor: where a mask comes from (a channel of an
upload, inverted or not, as ComfyUI's LoadImage and LoadImageMask read it), and the mask
operations, against values worked out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from graph_harness import Harness, graph, node
from PIL import Image

from inline_core.errors import InvalidGraph
from inline_core.graph.schema import PortKind, port_satisfies


def _store(h: Harness, name: str, image: Image.Image) -> dict[str, str]:
    path: Path = h.root / "assets" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    h.media.paths[("asset", name)] = path
    return {"ref": "asset", "id": name}


def _mask(h: Harness, asset: dict[str, str], channel: str, invert: bool) -> np.ndarray:
    raw = graph(node("m", "input/mask", {"asset": asset, "channel": channel, "invert": invert}))
    out = h.execute(raw, "m").outputs["mask"]
    assert isinstance(out, Image.Image) and out.mode == "L"
    return np.asarray(out)


def _op(h: Harness, mask: np.ndarray, type_: str, params: dict[str, Any]) -> np.ndarray:
    asset = _store(h, "op-src", Image.fromarray(mask.astype(np.uint8), "L"))
    raw = graph(
        node("src", "input/mask", {"asset": asset, "channel": "red", "invert": False}),
        node("op", type_, params, mask="src.mask"),
    )
    result = h.execute(raw, "op")
    assert result.takes == ()  # masks are inputs to renders, not takes
    return np.asarray(next(iter(result.outputs.values())))


def test_a_masks_channel_is_read_as_comfyui_loads_it(h: Harness) -> None:
    rgba = np.zeros((4, 6, 4), dtype=np.uint8)
    rgba[..., 0] = 200  # red
    rgba[..., 3] = 255
    rgba[1:3, 2:4, 3] = 0  # a transparent hole: what LoadImage's MASK repaints
    rgba[0, 0, 3] = 64  # and a partly transparent pixel
    asset = _store(h, "rgba", Image.fromarray(rgba, "RGBA"))
    alpha = _mask(h, asset, "alpha", invert=True)
    expected = np.zeros((4, 6), dtype=np.uint8)
    expected[1:3, 2:4] = 255
    expected[0, 0] = 255 - 64
    assert (alpha == expected).all()
    assert (_mask(h, asset, "alpha", invert=False) == 255 - expected).all()
    assert (_mask(h, asset, "red", invert=False) == 200).all()

    # No alpha: read as its RGBA conversion (opaque), so the inverted alpha keeps everything.
    rgb = _store(h, "rgb", Image.new("RGB", (5, 3), (10, 20, 30)))
    assert _mask(h, rgb, "alpha", invert=True).shape == (3, 5)
    assert (_mask(h, rgb, "alpha", invert=True) == 0).all()
    assert (_mask(h, rgb, "blue", invert=False) == 30).all()
    # A palette image with a transparent index has that transparency as its alpha.
    palette = Image.new("P", (3, 2), 0)
    palette.putpalette([0, 0, 0, 255, 255, 255])
    palette.putpixel((1, 1), 1)
    palette.info["transparency"] = 1
    assert _mask(h, _store(h, "palette", palette), "alpha", invert=True).tolist() == [
        [0, 0, 0],
        [0, 255, 0],
    ]


def test_the_mask_operations(h: Harness) -> None:
    dot = np.zeros((5, 5), dtype=np.uint8)
    dot[2, 2] = 255
    square = _op(h, dot, "mask/grow", {"expand": 1, "tapered_corners": False})
    assert (square == np.pad(np.full((3, 3), 255, np.uint8), 1)).all()
    cross = _op(h, dot, "mask/grow", {"expand": 1, "tapered_corners": True})
    assert cross.tolist() == [
        [0, 0, 0, 0, 0],
        [0, 0, 255, 0, 0],
        [0, 255, 255, 255, 0],
        [0, 0, 255, 0, 0],
        [0, 0, 0, 0, 0],
    ]
    # Two steps of the cross: a diamond; gray values are dilated by their maximum.
    soft = dot.copy()
    soft[0, 4] = 100
    diamond = _op(h, soft, "mask/grow", {"expand": 2, "tapered_corners": True})
    assert diamond[2].tolist() == [255, 255, 255, 255, 255]
    assert diamond[0].tolist() == [0, 0, 255, 100, 100] and diamond[1, 1] == 255
    # Shrinking: pixels past the edge never count, so a full mask stays full.
    full = np.full((4, 4), 255, dtype=np.uint8)
    assert (_op(h, full, "mask/grow", {"expand": -3, "tapered_corners": False}) == 255).all()
    assert (_op(h, square, "mask/grow", {"expand": -1, "tapered_corners": False}) == dot).all()

    ramp = np.arange(0, 250, 10, dtype=np.uint8).reshape(5, 5)
    assert (_op(h, ramp, "mask/invert", {}) == 255 - ramp).all()
    above = _op(h, ramp, "mask/threshold", {"value": 0.5})  # 127.5 of 255
    assert (above == np.where(ramp > 127.5, 255, 0)).all()
    image = _op(h, ramp, "mask/to-image", {})
    assert image.shape == (5, 5, 3) and (image == ramp[..., None]).all()


def test_a_channel_of_an_image_is_a_mask_and_an_image_feeds_a_mask_input(h: Harness) -> None:
    asset = h.asset("src", (4, 3), (10, 20, 30))
    raw = graph(
        node("src", "input/image", {"asset": asset}),
        node("green", "mask/from-image", {"channel": "green"}, image="src.image"),
        # An image wired into a mask input is read by its luminance.
        node("inverted", "mask/invert", {}, mask="src.image"),
    )
    green = np.asarray(h.execute(raw, "green").outputs["mask"])
    assert green.shape == (3, 4) and (green == 20).all()
    luminance = Image.new("RGB", (1, 1), (10, 20, 30)).convert("L").getpixel((0, 0))
    inverted = np.asarray(h.execute(raw, "inverted").outputs["mask"])
    assert (inverted == 255 - int(luminance)).all()  # pyright: ignore[reportArgumentType]
    assert port_satisfies(PortKind.IMAGE, PortKind.MASK)
    assert not port_satisfies(PortKind.MASK, PortKind.IMAGE)


def test_a_mask_of_a_missing_asset_is_refused_at_submit(h: Harness) -> None:
    raw = graph(
        node(
            "m",
            "input/mask",
            {"asset": {"ref": "asset", "id": "nope"}, "channel": "alpha", "invert": True},
        )
    )
    with pytest.raises(InvalidGraph) as caught:
        h.validate(raw, "m")
    assert caught.value.node_id == "m" and "nope" in caught.value.message
