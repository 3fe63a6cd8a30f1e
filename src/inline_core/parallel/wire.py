"""The job wire: a request's fields as plain params plus raw blobs, for any family (torch-free).

A request state is a dataclass. Its input fields (every `init` field not marked `LOCAL`) cross
into the worker group; each rank rebuilds the state with its own pipeline's `request(**fields)`, so
prompt encoding, noise and schedule are computed there exactly as in process. Values are encoded
by type, not by a hand-listed field set: plain JSON values as they are; lists, tuples and dicts
item by item; images as raw pixels (not PNG) and tensors and arrays as their raw bytes with dtype
and shape, so everything arrives bit for bit; nested dataclasses (a `Conditioning`, `Latents`) as
their class and fields.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
from PIL import Image

from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import (
    RemoteRequest,
    is_tensor,
    pack_image,
    pack_tensor,
    unpack_image,
    unpack_tensor,
)

# Field metadata for state that stays where it is made (the step reached, the schedule, latents
# in flight, the pipeline's own model key): `field(default=..., metadata=LOCAL)`.
LOCAL: Mapping[str, object] = {"wire": False}
KIND = "@"  # the key that says how an encoded value is to be read back


def state_fields(state: object) -> dict[str, object]:
    """A request state's input fields: what a rank needs to rebuild it."""
    if not dataclasses.is_dataclass(state) or isinstance(state, type):
        raise TypeError(f"a {type(state).__name__} is not a request dataclass")
    return {
        f.name: getattr(state, f.name)
        for f in dataclasses.fields(state)
        if f.init and f.metadata.get("wire", True)
    }


def encode_fields(fields: Mapping[str, object], **envelope: Json) -> RemoteRequest:
    """`fields` as a `RemoteRequest`; `envelope` adds plain params beside them (e.g. `output`)."""
    blobs: dict[str, bytes] = {}
    encoded = {name: _encode(value, blobs) for name, value in fields.items()}
    return RemoteRequest({**envelope, "fields": encoded}, blobs)


def decode_fields(request: RemoteRequest) -> dict[str, Any]:
    """The fields `encode_fields` sent."""
    encoded = request.params.get("fields")
    if not isinstance(encoded, dict):
        raise ValueError("the request carries no fields")
    return {name: _decode(value, request.blobs) for name, value in encoded.items()}


def _blob(blobs: dict[str, bytes], data: bytes) -> str:
    name = f"b{len(blobs)}"
    blobs[name] = data
    return name


def _encode(value: object, blobs: dict[str, bytes]) -> Json:
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Image.Image):
        meta, data = pack_image(value)
        return {KIND: "image", "blob": _blob(blobs, data), **meta}
    if is_tensor(value):
        meta, data = pack_tensor(value)
        return {KIND: "tensor", "blob": _blob(blobs, data), **meta}
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(cast(np.ndarray[Any, Any], value))
        if array.dtype.hasobject:
            raise TypeError("object arrays cannot cross the worker boundary")
        meta: dict[str, Json] = {"dtype": array.dtype.str, "shape": list(array.shape)}
        return {KIND: "ndarray", "blob": _blob(blobs, array.tobytes()), **meta}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        fields = {
            f.name: _encode(getattr(value, f.name), blobs)
            for f in dataclasses.fields(value)
            if f.init
        }
        return {
            KIND: "dataclass",
            "class": f"{cls.__module__}:{cls.__qualname__}",
            "fields": fields,
        }
    if isinstance(value, list | tuple):
        items = [_encode(item, blobs) for item in cast(list[object], value)]
        return {KIND: "tuple" if isinstance(value, tuple) else "list", "items": items}
    if isinstance(value, dict):
        entries = cast(dict[object, object], value)
        if not all(isinstance(key, str) for key in entries):
            raise TypeError("only string-keyed dicts cross the worker boundary")
        return {KIND: "dict", "items": {str(k): _encode(v, blobs) for k, v in entries.items()}}
    raise TypeError(f"a {type(value).__name__} cannot cross the worker boundary")


def _decode(value: Json, blobs: Mapping[str, bytes]) -> Any:
    if not isinstance(value, dict):
        return value
    kind = value.get(KIND)
    if kind == "image":
        return unpack_image(value, blobs[str(value["blob"])])
    if kind == "tensor":
        return unpack_tensor(value, blobs[str(value["blob"])])
    if kind == "ndarray":
        shape = tuple(int(n) for n in cast(list[int], value["shape"]))
        data = blobs[str(value["blob"])]
        return np.frombuffer(data, dtype=np.dtype(str(value["dtype"]))).reshape(shape).copy()
    if kind == "dataclass":
        cls = _dataclass(str(value["class"]))
        fields = cast(dict[str, Json], value["fields"])
        return cls(**{k: _decode(v, blobs) for k, v in fields.items()})
    if kind in ("list", "tuple"):
        items = [_decode(item, blobs) for item in cast(list[Json], value["items"])]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {k: _decode(v, blobs) for k, v in cast(dict[str, Json], value["items"]).items()}
    raise ValueError(f"unknown wire value kind {kind!r}")


def _dataclass(dotted: str) -> type[Any]:
    module_name, _, qualname = dotted.partition(":")
    target: object = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    if not isinstance(target, type) or not dataclasses.is_dataclass(target):
        raise ValueError(f"{dotted} is not a dataclass")
    return target
