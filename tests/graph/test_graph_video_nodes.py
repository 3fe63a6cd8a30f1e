"""`video/frame` takes one frame of a video out as an image, and an image wired into a video
input is a one-frame video (the graph's image -> video coercion)."""

from __future__ import annotations

import numpy as np
import pytest
from graph_harness import Harness, graph, node
from PIL import Image

from inline_core.errors import InvalidGraph, InvalidRequest
from inline_core.graph.schema import PortKind, port_satisfies
from inline_core.runtime.video import Video


def test_an_image_feeds_a_video_input_but_not_the_reverse() -> None:
    assert port_satisfies(PortKind.IMAGE, PortKind.VIDEO)
    assert not port_satisfies(PortKind.VIDEO, PortKind.IMAGE)
    assert not port_satisfies(PortKind.VIDEO, PortKind.IMAGES)


@pytest.mark.parametrize("index", [0, -1])
def test_an_image_is_a_one_frame_video_whose_frame_is_the_image(h: Harness, index: int) -> None:
    raw = graph(
        node("src", "input/image", {"asset": h.asset("src", (24, 16), (10, 200, 30))}),
        node("f", "video/frame", {"index": index}, video="src.image"),
    )
    result = h.execute(raw, "f")
    image = result.outputs["image"]
    assert isinstance(image, Image.Image) and image.size == (24, 16)
    assert image.getpixel((3, 3)) == (10, 200, 30)
    (take,) = result.takes
    assert take.kind == "image" and take.params["index"] == index


def test_frames_are_taken_by_index_from_either_end() -> None:
    frames = np.zeros((5, 4, 6, 3), dtype=np.uint8)
    for i in range(5):
        frames[i] = i * 40
    video = Video(frames, fps=8)
    assert video.frame_count == 5
    assert video.frame(0).getpixel((0, 0)) == (0, 0, 0)
    assert video.frame(3).getpixel((0, 0)) == (120, 120, 120)
    assert video.frame(-1).getpixel((0, 0)) == (160, 160, 160)
    assert video.frame(-5).getpixel((0, 0)) == (0, 0, 0)
    with pytest.raises(IndexError):
        video.frame(5)


def test_an_index_past_the_end_fails_the_node_naming_the_param(h: Harness) -> None:
    raw = graph(
        node("src", "input/image", {"asset": h.asset("src", (8, 8))}),
        node("f", "video/frame", {"index": 1}, video="src.image"),
    )
    with pytest.raises(InvalidRequest, match=r"'index' 1 is outside the video's 1 frames"):
        h.execute(raw, "f")


def test_a_frame_does_not_feed_a_text_input(h: Harness) -> None:
    raw = graph(
        node("src", "input/image", {"asset": h.asset("src", (8, 8))}),
        node("f", "video/frame", {}, video="src.image"),
        node("t", "test/echo", {"suffix": "!"}, text="f.image"),
    )
    with pytest.raises(InvalidGraph):
        h.validate(raw, "t")
