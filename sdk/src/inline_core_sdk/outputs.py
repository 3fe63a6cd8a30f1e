"""A node's returned values in their wire form: image pixels into the arena's output half (a raw
pixel file when there is no arena or they do not fit), video and audio files by path, text and
numbers by value."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from inline_core_sdk.arena import ArenaImage, Region
from inline_core_sdk.media import ImageRef, MediaFile, image_pixels, value_to_wire, write_in_place
from inline_core_sdk.nodes import Node


class OutputError(TypeError):
    """A node returned something its declared outputs cannot carry."""


def _media_file(value: object, kind: str, port: str) -> MediaFile:
    if isinstance(value, MediaFile):
        return value
    if isinstance(value, str | Path):
        return MediaFile(Path(value), kind)
    raise OutputError(f"output {port!r} ({kind}) must be a file path, got {type(value).__name__}")


class _Writer:
    def __init__(self, out_dir: Path, arena: Region | None) -> None:
        self.out_dir = out_dir
        self.arena = arena

    def image(self, value: object, name: str, kind: str) -> dict[str, Any]:
        if isinstance(value, ImageRef):
            return value.to_wire()  # a raw pixel file the node wrote itself
        pixels = image_pixels(value)
        if self.arena is not None:
            offset = self.arena.put(pixels.data)
            if offset is not None:
                return ArenaImage(offset, pixels.width, pixels.height, pixels.mode, kind).to_wire()
        path = self.out_dir / f"{name}.raw"
        write_in_place(path, pixels.data)
        return ImageRef(path, pixels.width, pixels.height, pixels.mode, kind).to_wire()

    def value(self, node: Node, port: str, value: object) -> object:
        spec = next((p for p in node.outputs if p.name == port), None)
        if spec is None:
            raise OutputError(f"output {port!r} is not declared by {type(node).__name__}")
        if spec.kind in ("image", "mask"):
            return self.image(value, port, spec.kind)
        if spec.kind == "image[]":
            items = cast(list[object], value) if isinstance(value, list | tuple) else [value]
            return [self.image(item, f"{port}-{i}", "image") for i, item in enumerate(items)]
        if spec.kind in ("video", "audio"):
            return _media_file(value, spec.kind, port).to_wire()
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if spec.kind == "number" and not number:
            raise OutputError(f"output {port!r} must be a number, got {type(value).__name__}")
        if spec.kind == "text" and not isinstance(value, str):
            raise OutputError(f"output {port!r} must be text, got {type(value).__name__}")
        return value_to_wire(value)


def encode_outputs(
    node: Node, outputs: Mapping[str, object], out_dir: Path, arena: Region | None
) -> dict[str, object]:
    """One call's outputs, the last call's in the arena overwritten (the server has read them)."""
    if arena is not None:
        arena.begin_call()
    writer = _Writer(out_dir, arena)
    return {port: writer.value(node, port, value) for port, value in outputs.items()}
