"""Pixels as the family tests compare them: int16 RGB arrays (a difference never wraps), from an
image or a node's one image take, and their largest difference."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from PIL import Image

from inline_core.graph.runner import NodeResult

Pixels = npt.NDArray[np.int16]


def pixels(image: Image.Image) -> Pixels:
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def take_pixels(result: NodeResult) -> Pixels:
    (take,) = result.takes
    with Image.open(take.path) as image:
        return pixels(image)


def max_diff(a: Pixels, b: Pixels) -> int:
    assert a.shape == b.shape, (a.shape, b.shape)
    return int(np.abs(a - b).max())
