"""Media passed by reference: what crosses between the server and a pack is a file or shared
memory, never pixels in JSON.

An image (or a mask) is raw pixels (`image_ref.py`), so neither side spends time encoding PNGs:
a place in the worker's arena (`arena.py`) or a raw pixel file. Video and audio are files in
their own container format. Text and numbers travel by value. The server writes inputs into the
arena, or into the call's folder in the pack's scratch dir, and reads outputs from the same.

Pillow and numpy are imported only when a helper needs them, from whatever version the pack pins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from inline_core_sdk.arena import ArenaImage
from inline_core_sdk.errors import WireError
from inline_core_sdk.image_ref import ImageRef, write_in_place
from inline_core_sdk.packing import CHANNELS, packed

__all__ = [
    "CHANNELS",
    "ArenaImage",
    "ImageRef",
    "MediaFile",
    "Pixels",
    "RawImage",
    "WireError",
    "from_wire",
    "image_pixels",
    "value_to_wire",
    "write_image",
    "write_in_place",
]

_MODE_FOR_CHANNELS = {1: "L", 3: "RGB", 4: "RGBA"}


class _PilImage(Protocol):
    mode: str
    size: tuple[int, int]

    def tobytes(self) -> bytes: ...


class _Array(Protocol):
    shape: tuple[int, ...]
    dtype: Any

    def tobytes(self) -> bytes: ...


@dataclass(frozen=True)
class RawImage:
    """Pixels as bytes, for a pack that has neither Pillow nor numpy (rows top to bottom)."""

    mode: str
    size: tuple[int, int]  # (width, height), as Pillow orders it
    data: bytes

    def tobytes(self) -> bytes:
        return self.data


@dataclass(frozen=True)
class MediaFile:
    """A video or audio file (the container says its format; the suffix names it)."""

    path: Path
    kind: str  # "video" | "audio"

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()

    def to_wire(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path)}


@dataclass(frozen=True)
class Pixels:
    """An image's raw pixels, rows top to bottom, laid out as `mode` says."""

    data: bytes
    width: int
    height: int
    mode: str


def image_pixels(value: object) -> Pixels:
    """The raw pixels of a Pillow image, a numpy uint8 array or a `RawImage`."""
    if hasattr(value, "mode") and hasattr(value, "size"):
        image = cast(_PilImage, value)
        if image.mode not in CHANNELS:
            raise WireError(f"image mode {image.mode!r}: convert to RGB, RGBA or L first")
        width, height = image.size
        return Pixels(packed(image), width, height, image.mode)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        array = cast(_Array, value)
        if str(array.dtype) != "uint8" or len(array.shape) not in (2, 3):
            raise WireError(f"arrays must be uint8 HxW or HxWxC, got {array.dtype} {array.shape}")
        channels = 1 if len(array.shape) == 2 else array.shape[2]
        if channels not in _MODE_FOR_CHANNELS:
            raise WireError(f"arrays need 1, 3 or 4 channels, got {channels}")
        mode = _MODE_FOR_CHANNELS[channels]
        return Pixels(array.tobytes(), array.shape[1], array.shape[0], mode)
    raise WireError(f"an image must be a Pillow image or a numpy array, got {type(value).__name__}")


def write_image(value: object, path: Path, kind: str = "image") -> ImageRef:
    """Write a Pillow image or a numpy uint8 array as a raw pixel file; its reference."""
    pixels = image_pixels(value)
    write_in_place(path, pixels.data)
    return ImageRef(path, pixels.width, pixels.height, pixels.mode, kind)


def _field(obj: dict[str, Any], name: str, kind: type) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise WireError(f"a reference needs {name!r} as {kind.__name__}, got {value!r}")
    return value


def from_wire(raw: object) -> object:
    """The value behind one wire reference: an `ImageRef` or `ArenaImage`, a `MediaFile`, a str
    or a number."""
    if not isinstance(raw, dict):
        raise WireError(f"a reference must be an object, got {type(raw).__name__}")
    obj = cast(dict[str, Any], raw)
    kind = obj.get("kind")
    if kind in ("image", "mask"):
        mode = _field(obj, "mode", str)
        if mode not in CHANNELS:
            raise WireError(f"unknown image mode {mode!r}")
        width, height = _field(obj, "width", int), _field(obj, "height", int)
        if "arena" in obj:
            path = Path(_field(obj, "path", str)) if "path" in obj else None
            return ArenaImage(_field(obj, "arena", int), width, height, mode, kind, path)
        return ImageRef(Path(_field(obj, "path", str)), width, height, mode, kind)
    if kind in ("video", "audio"):
        return MediaFile(Path(_field(obj, "path", str)), kind)
    if kind == "text":
        return str(_field(obj, "value", str))
    if kind == "number":
        value = obj.get("value")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WireError(f"a number reference needs a numeric 'value', got {value!r}")
        return value
    raise WireError(f"unknown reference kind {kind!r}")


def value_to_wire(value: object) -> dict[str, Any]:
    """The wire form of a text, a number or an already written media reference."""
    if isinstance(value, ImageRef | MediaFile):
        return value.to_wire()
    if isinstance(value, str):
        return {"kind": "text", "value": value}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"kind": "number", "value": value}
    raise WireError(f"cannot send a {type(value).__name__} by reference")
