"""Media passed by reference: what crosses between the server and a pack is a file, never pixels
in JSON.

An image (or a mask) is a raw pixel file, rows top to bottom, `mode` as Pillow names it ("RGB",
"RGBA", or "L" for a mask), so neither side spends time encoding PNGs. Video and audio are files
in their own container format. Text and numbers travel by value. The server writes inputs into
the call's folder in the pack's scratch dir and reads outputs from there.

Pillow and numpy are imported only when a helper needs them, from whatever version the pack pins.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

CHANNELS = {"L": 1, "RGB": 3, "RGBA": 4}
_MODE_FOR_CHANNELS = {1: "L", 3: "RGB", 4: "RGBA"}


def write_in_place(path: Path, data: bytes) -> None:
    """Write `data` over the file's old bytes: a call's folder is reused, and rewriting pages
    a file already holds costs a fraction of allocating new ones (a 1024 px image: 1.2 ms).
    A symlink in its place is refused, not followed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


class WireError(ValueError):
    """A reference that does not have the wire form (a bug on one side, reported as such)."""


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
class ImageRef:
    """An image (or mask) as a raw pixel file."""

    path: Path
    width: int
    height: int
    mode: str
    kind: str = "image"

    def read_bytes(self) -> bytes:
        data = self.path.read_bytes()
        expected = self.width * self.height * CHANNELS[self.mode]
        if len(data) != expected:
            raise WireError(f"{self.path.name} holds {len(data)} bytes, not {expected}")
        return data

    def to_pil(self) -> Any:
        """A Pillow image (the pack's own Pillow), decoded straight from the mapped file: one
        copy of the pixels fewer than reading them first."""
        from PIL import Image

        expected = self.width * self.height * CHANNELS[self.mode]
        with self.path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size != expected or size == 0:
                raise WireError(f"{self.path.name} holds {size} bytes, not {expected}")
            with (
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
                memoryview(mapped) as pixels,
            ):
                return Image.frombytes(self.mode, (self.width, self.height), pixels)

    def to_array(self) -> Any:
        """A numpy uint8 array, height x width (x channels unless a mask)."""
        import numpy as np

        flat = np.frombuffer(self.read_bytes(), dtype=np.uint8)
        channels = CHANNELS[self.mode]
        shape = (self.height, self.width) if channels == 1 else (self.height, self.width, channels)
        return flat.reshape(shape)

    def to_wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "width": self.width,
            "height": self.height,
            "mode": self.mode,
        }


@dataclass(frozen=True)
class MediaFile:
    """A video or audio file (the container says its format; the suffix names it)."""

    path: Path
    kind: str  # "video" | "audio"

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()

    def to_wire(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path)}


def write_image(value: object, path: Path, kind: str = "image") -> ImageRef:
    """Write a Pillow image or a numpy uint8 array as a raw pixel file; its reference."""
    if hasattr(value, "mode") and hasattr(value, "size"):
        image = cast(_PilImage, value)
        if image.mode not in CHANNELS:
            raise WireError(f"image mode {image.mode!r}: convert to RGB, RGBA or L first")
        write_in_place(path, image.tobytes())
        width, height = image.size
        return ImageRef(path, width, height, image.mode, kind)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        array = cast(_Array, value)
        if str(array.dtype) != "uint8" or len(array.shape) not in (2, 3):
            raise WireError(f"arrays must be uint8 HxW or HxWxC, got {array.dtype} {array.shape}")
        channels = 1 if len(array.shape) == 2 else array.shape[2]
        if channels not in _MODE_FOR_CHANNELS:
            raise WireError(f"arrays need 1, 3 or 4 channels, got {channels}")
        write_in_place(path, array.tobytes())
        return ImageRef(path, array.shape[1], array.shape[0], _MODE_FOR_CHANNELS[channels], kind)
    raise WireError(f"an image must be a Pillow image or a numpy array, got {type(value).__name__}")


def _field(obj: dict[str, Any], name: str, kind: type) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise WireError(f"a reference needs {name!r} as {kind.__name__}, got {value!r}")
    return value


def from_wire(raw: object) -> object:
    """The value behind one wire reference: an `ImageRef`, a `MediaFile`, a str or a number."""
    if not isinstance(raw, dict):
        raise WireError(f"a reference must be an object, got {type(raw).__name__}")
    obj = cast(dict[str, Any], raw)
    kind = obj.get("kind")
    if kind in ("image", "mask"):
        mode = _field(obj, "mode", str)
        if mode not in CHANNELS:
            raise WireError(f"unknown image mode {mode!r}")
        path = Path(_field(obj, "path", str))
        return ImageRef(path, _field(obj, "width", int), _field(obj, "height", int), mode, kind)
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
