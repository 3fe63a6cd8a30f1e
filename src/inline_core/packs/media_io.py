"""Node values <-> the SDK's references, on the server's side of a pack call.

Image and mask inputs go into the worker's arena as raw pixels (`arena.py`), or, where there is
none or they do not fit, into raw pixel files in the call's folder in the worker's scratch dir;
video and audio are copied there. Outputs are read back from the same places (raw pixel files
with `raw_pixels.py`, never mapped), and media outputs become takes as a built-in node's do. A
reference that points outside the call's folder is refused: a pack cannot make the server read a
file of its choosing.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from PIL import Image

from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.graph.schema import PortKind
from inline_core.media import MediaKind
from inline_core.packs.errors import PackNodeFailed
from inline_core.packs.raw_pixels import RawPixelReader, RawPixelsError
from inline_core.packs.wire import PackNode
from inline_core.takes import Take
from inline_core_sdk.arena import Arena, ArenaError, ArenaImage
from inline_core_sdk.media import (
    CHANNELS,
    ImageRef,
    MediaFile,
    WireError,
    from_wire,
    image_pixels,
    write_in_place,
)
from inline_core_sdk.media import value_to_wire as scalar_to_wire

MAX_PIXELS = 8192 * 8192
_FILE_KINDS = {PortKind.VIDEO: MediaKind.VIDEO, PortKind.AUDIO: MediaKind.AUDIO}


def _image_to_wire(
    value: object, kind: PortKind, path: Path, arena: Arena | None
) -> dict[str, Any]:
    """Into the arena where it fits (the worker writes the file at `path` only if asked for it),
    else into the file."""
    if not isinstance(value, Image.Image):
        raise PackNodeFailed(f"input for a {kind.value} port is a {type(value).__name__}")
    wanted = "L" if kind == PortKind.MASK else value.mode if value.mode in CHANNELS else "RGB"
    pixels = image_pixels(value if value.mode == wanted else value.convert(wanted))
    name = "mask" if kind == PortKind.MASK else "image"
    offset = arena.inputs.put(pixels.data) if arena is not None else None
    if offset is not None:
        return ArenaImage(offset, pixels.width, pixels.height, pixels.mode, name, path).to_wire()
    write_in_place(path, pixels.data)
    return ImageRef(path, pixels.width, pixels.height, pixels.mode, name).to_wire()


def _value_to_wire(
    kind: PortKind, value: object, path: Path, arena: Arena | None
) -> dict[str, Any]:
    if kind in (PortKind.IMAGE, PortKind.MASK):
        return _image_to_wire(value, kind, path, arena)
    if kind in _FILE_KINDS:
        if not isinstance(value, MediaFile):
            raise PackNodeFailed(f"input for a {kind.value} port is a {type(value).__name__}")
        copy = path.with_suffix(value.path.suffix)
        shutil.copyfile(value.path, copy)
        return MediaFile(copy, kind.value).to_wire()
    return scalar_to_wire(value)


def inputs_to_wire(
    descriptor: NodeDescriptor, inputs: Mapping[str, Any], call_dir: Path, arena: Arena | None
) -> dict[str, Any]:
    if arena is not None:
        arena.inputs.begin_call()  # the worker is done with the last call's
    out: dict[str, Any] = {}
    for port, value in inputs.items():
        spec = descriptor.input(port)
        if spec is None:
            continue
        if spec.kind == PortKind.IMAGES or spec.multiple:
            kind = PortKind.IMAGE if spec.kind == PortKind.IMAGES else spec.kind
            out[port] = [
                _value_to_wire(kind, item, call_dir / f"in-{port}-{i}.raw", arena)
                for i, item in enumerate(cast(list[object], value))
            ]
        else:
            out[port] = _value_to_wire(spec.kind, value, call_dir / f"in-{port}.raw", arena)
    return out


def _inside(path: Path, call_dir: Path, what: str) -> Path:
    resolved = path.resolve()
    if not resolved.is_relative_to(call_dir.resolve()) or not resolved.is_file():
        raise PackNodeFailed(f"{what} names {path}, which is not a file in the call's folder")
    return resolved


@dataclass(frozen=True)
class OutputSources:
    """Where a worker's image outputs are read from: its arena, or raw pixel files."""

    call_dir: Path
    files: RawPixelReader
    arena: Arena | None


def _arena_image(ref: ArenaImage, arena: Arena) -> Image.Image:
    size = ref.width * ref.height * CHANNELS[ref.mode]
    with arena.outputs.view(ref.offset, size) as pixels:  # no copy before the decode
        return Image.frombytes(ref.mode, (ref.width, ref.height), pixels)


def _read_image(value: ImageRef | ArenaImage, sources: OutputSources, what: str) -> Image.Image:
    if not 0 < value.width * value.height <= MAX_PIXELS:
        raise PackNodeFailed(f"{what} is {value.width}x{value.height}, over the pixel limit")
    try:
        if isinstance(value, ArenaImage):
            if sources.arena is None:
                raise PackNodeFailed(f"{what} names an arena, and its worker was given none")
            return _arena_image(value, sources.arena)
        path = _inside(value.path, sources.call_dir, what)
        return sources.files.image(path, value.width, value.height, value.mode)
    except (ArenaError, RawPixelsError, OSError) as exc:
        raise PackNodeFailed(f"{what}: {exc}") from exc


def _read_value(kind: PortKind, raw: object, sources: OutputSources, what: str) -> object:
    try:
        value = from_wire(raw)
    except WireError as exc:
        raise PackNodeFailed(f"{what}: {exc}") from exc
    if kind in (PortKind.IMAGE, PortKind.MASK):
        if not isinstance(value, ImageRef | ArenaImage):
            raise PackNodeFailed(f"{what} is not an image")
        image = _read_image(value, sources, what)
        return image.convert("L") if kind == PortKind.MASK and image.mode != "L" else image
    if kind in _FILE_KINDS:
        if not isinstance(value, MediaFile):
            raise PackNodeFailed(f"{what} is not a {kind.value} file")
        return MediaFile(_inside(value.path, sources.call_dir, what), kind.value)
    if kind == PortKind.TEXT and not isinstance(value, str):
        raise PackNodeFailed(f"{what} is not text")
    if kind == PortKind.NUMBER and not isinstance(value, int | float):
        raise PackNodeFailed(f"{what} is not a number")
    return value


def outputs_from_wire(
    node: PackNode, outputs: Mapping[str, Any], sources: OutputSources
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    where = f"pack {node.pack!r} node {node.node!r}"
    for spec in node.descriptor.outputs:
        if spec.name not in outputs:
            raise PackNodeFailed(f"{where} returned no value for its output {spec.name!r}")
        raw = outputs[spec.name]
        what = f"{where} output {spec.name!r}"
        if spec.kind == PortKind.IMAGES:
            items = cast(list[object], raw) if isinstance(raw, list) else [raw]
            values[spec.name] = [_read_value(PortKind.IMAGE, r, sources, what) for r in items]
        else:
            values[spec.name] = _read_value(spec.kind, raw, sources, what)
    return values


def _save(call: NodeCall, node: PackNode, kind: PortKind, value: object, index: int) -> Take:
    if isinstance(value, Image.Image):
        return call.ctx.save_image(call.node_id, value, call.params, index)
    media = cast(MediaFile, value)
    return call.ctx.takes.write(
        run_id=call.ctx.run_id,
        node_id=call.node_id,
        index=index,
        kind=_FILE_KINDS[kind],
        data=media.path.read_bytes(),
        suffix=media.path.suffix or ".bin",
        params=dict(call.params),
    )


def result_with_takes(call: NodeCall, node: PackNode, values: dict[str, Any]) -> NodeResult:
    """Media outputs as takes, in the order the node declares them. Video and audio always
    become takes (the call's folder is gone once the call ends); images unless the node opts
    out."""
    takes: list[Take] = []
    for spec in node.descriptor.outputs:
        value = values[spec.name]
        if spec.kind in _FILE_KINDS:
            take = _save(call, node, spec.kind, value, len(takes))
            takes.append(take)
            values[spec.name] = MediaFile(Path(take.path), spec.kind.value)
        elif node.saves_takes and spec.kind in (PortKind.IMAGE, PortKind.MASK, PortKind.IMAGES):
            items = cast(list[object], value) if spec.kind == PortKind.IMAGES else [value]
            for item in items:
                takes.append(_save(call, node, spec.kind, item, len(takes)))
    return NodeResult(outputs=values, takes=tuple(takes))
