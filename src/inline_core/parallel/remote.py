"""How a step pipeline and its requests cross into the worker group (torch-free).

The server's handle on a pipeline that runs split implements `RemotePipeline`: it names a loader
that rebuilds the same pipeline inside each rank from plain arguments (the family, its files,
dtypes), and turns a request state into plain params plus raw blobs (`remote_request`, with the
wire codec in `wire.py`); the rank rebuilds the state with its own pipeline's `request()`.
Outputs come back as raw arrays and are rebuilt into the type the in-process path returns (a PIL
image, a video's frames with its rate and format, a numpy array, a torch tensor, or a list of
them), bit for bit. Tensors travel as their raw bytes with dtype and shape, so every dtype
(bfloat16, which numpy lacks, included) arrives exactly as it left.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
from PIL import Image

from inline_core.parallel.protocol import Array, Json
from inline_core.runtime.video import Audio, Video


@dataclass(frozen=True)
class PipelineSpec:
    """How every rank rebuilds the pipeline: `resolve(loader)(device=<rank device>, **args)`."""

    loader: str  # "package.module:function"
    args: dict[str, Json] = field(default_factory=dict[str, Json])

    @property
    def key(self) -> str:
        """Equal keys mean the same resident pipeline (a group holds exactly one)."""
        return json.dumps({"loader": self.loader, "args": self.args}, sort_keys=True)


@dataclass(frozen=True)
class RemoteRequest:
    params: dict[str, Json] = field(default_factory=dict[str, Json])
    blobs: dict[str, bytes] = field(default_factory=dict[str, bytes])


@runtime_checkable
class RemotePipeline(Protocol):
    def remote_spec(self) -> PipelineSpec: ...

    def remote_request(self, state: Any, /) -> RemoteRequest: ...


# -- images and outputs --------------------------------------------------------------------------


def pack_image(image: Image.Image) -> tuple[dict[str, Json], bytes]:
    """An image as (mode and size, raw pixel bytes): exact, and no PNG encode on the hot path."""
    return {"mode": image.mode, "size": [image.width, image.height]}, image.tobytes()


def unpack_image(meta: Mapping[str, Json], data: bytes) -> Image.Image:
    size = cast(list[int], meta["size"])
    return Image.frombytes(str(meta["mode"]), (int(size[0]), int(size[1])), data)


def encode_output(value: object) -> tuple[dict[str, Json], dict[str, Array]]:
    """A pipeline output as (description, arrays); `decode_output` rebuilds it."""
    arrays: dict[str, Array] = {}
    description = _describe(value, arrays)
    return cast(dict[str, Json], description), arrays


def decode_output(meta: Json, arrays: Mapping[str, Array]) -> Any:
    if not isinstance(meta, dict):
        raise ValueError("malformed output description")
    kind = meta.get("kind")
    if kind == "list":
        return [decode_output(item, arrays) for item in cast(list[Json], meta["items"])]
    array = arrays[str(meta["array"])]
    if kind == "image":
        return unpack_image(meta, array.tobytes())
    if kind == "ndarray":
        return array.copy()  # writable, like the in-process result
    if kind == "tensor":
        return unpack_tensor(meta, array.tobytes())
    if kind == "video":
        sound = meta.get("audio")
        audio = None
        if isinstance(sound, dict):  # its soundtrack, (channels, samples) float32
            samples = arrays[str(sound["array"])].copy()
            audio = Audio(samples, int(cast(int, sound["sampleRate"])))
        return Video(array.copy(), int(cast(int, meta["fps"])), str(meta["format"]), audio)
    raise ValueError(f"unknown output kind {kind!r}")


def _describe(value: object, arrays: dict[str, Array]) -> Json:
    name = f"output.{len(arrays)}"
    if isinstance(value, Image.Image):
        meta, data = pack_image(value)
        arrays[name] = np.frombuffer(data, dtype=np.uint8)
        return {"kind": "image", "array": name, **meta}
    if isinstance(value, np.ndarray):
        arrays[name] = cast(Array, value)
        return {"kind": "ndarray", "array": name}
    if isinstance(value, Video):  # its frames as they are, uint8 (frames, height, width, 3)
        arrays[name] = cast(Array, value.frames)
        video: dict[str, Json] = {
            "kind": "video",
            "array": name,
            "fps": value.fps,
            "format": value.format,
        }
        if value.audio is not None:
            arrays[f"{name}.audio"] = cast(Array, value.audio.samples)
            video["audio"] = {"array": f"{name}.audio", "sampleRate": value.audio.sample_rate}
        return video
    if isinstance(value, list | tuple):
        items = cast(Sequence[object], value)
        return {"kind": "list", "items": [_describe(item, arrays) for item in items]}
    if is_tensor(value):
        meta, data = pack_tensor(value)
        arrays[name] = np.frombuffer(data, dtype=np.uint8)
        return {"kind": "tensor", "array": name, **meta}
    raise TypeError(f"a {type(value).__name__} output cannot come back from the worker group")


# -- tensors -------------------------------------------------------------------------------------


def is_tensor(value: object) -> bool:
    """A torch tensor, told without importing torch (a server that has none never sends one)."""
    return callable(getattr(value, "numpy", None)) and hasattr(value, "detach")


def pack_tensor(tensor: object) -> tuple[dict[str, Json], bytes]:
    """A tensor as (dtype and shape, its raw bytes), read on the CPU."""
    import torch  # the caller holds a tensor, so torch is already imported

    t = cast(torch.Tensor, tensor).detach().cpu().contiguous()
    meta: dict[str, Json] = {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": [int(n) for n in t.shape],
    }
    return meta, t.reshape(-1).view(torch.uint8).numpy().tobytes()


def unpack_tensor(meta: Mapping[str, Json], data: bytes) -> Any:
    """The tensor `pack_tensor` described, on the CPU (writable, like the one that was sent)."""
    import torch

    dtype = getattr(torch, str(meta["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown tensor dtype {meta['dtype']!r}")
    shape = [int(n) for n in cast(list[int], meta["shape"])]
    if not data:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)
