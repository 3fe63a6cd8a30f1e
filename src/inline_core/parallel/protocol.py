"""Messages between the server and the worker group, and their wire form.

A frame is `[u32 header length][header JSON][blob 0][blob 1]...`. The header names the message type
and its fields; every `bytes` value and numpy array in a field is replaced by a reference to a raw
blob (arrays keep their dtype and shape), so pixels and latents never travel as JSON numbers.
`multiprocessing.connection` adds the outer length prefix and the authentication.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt

Json: TypeAlias = str | int | float | bool | None | list["Json"] | dict[str, "Json"]
Array = npt.NDArray[Any]

_HEADER = struct.Struct("!I")


@dataclass(frozen=True)
class Hello:
    """First message of every rank on its own connection."""

    rank: int
    world_size: int
    pid: int


@dataclass(frozen=True)
class Ready:
    """Rank 0, once every rank holds the pipeline."""

    info: dict[str, Json] = field(default_factory=dict[str, Json])


@dataclass(frozen=True)
class StartFailed:
    """A rank could not load its pipeline; the group exits after sending it."""

    rank: int
    message: str


@dataclass(frozen=True)
class Job:
    job_id: int
    params: dict[str, Json]
    blobs: dict[str, bytes] = field(default_factory=dict[str, bytes])
    # Step previews rank 0 renders for it: {"method", "size", "vaeApprox"} (None: off).
    preview: dict[str, Json] | None = None


@dataclass(frozen=True)
class Phase:
    job_id: int
    phase: str  # "encode" | "sample" | "decode"


@dataclass(frozen=True)
class Progress:
    job_id: int
    step: int
    count: int


@dataclass(frozen=True)
class PreviewFrame:
    """One step preview rank 0 rendered: the encoded image and what it is (format, width,
    height, method)."""

    job_id: int
    step: int
    count: int
    image: bytes
    info: dict[str, Json] = field(default_factory=dict[str, Json])


@dataclass(frozen=True)
class Cancel:
    job_id: int
    reason: str = "cancelled"


@dataclass(frozen=True)
class Hold:
    """To rank 0: hold its step loop at the next boundary until the next `count` jobs reach it
    (refused ones too; a `Shutdown` or `Load` ends it; or `timeout_s` passes), so jobs sent
    together are admitted together instead of as each happens to arrive (`WorkerGroup.gather`).
    A runner without a step loop ignores it."""

    count: int
    timeout_s: float


@dataclass(frozen=True)
class Result:
    """Every rank ends a job with a `Result` or a `Failure`; rank 0's carries the output."""

    job_id: int
    rank: int
    meta: dict[str, Json] = field(default_factory=dict[str, Json])
    arrays: dict[str, Array] = field(default_factory=dict[str, Array])


@dataclass(frozen=True)
class Failure:
    job_id: int
    rank: int
    code: str
    status: int
    message: str
    at: float = 0.0  # the rank's time.monotonic() when it caught the error
    peers_down: list[int] = field(default_factory=list[int])  # gone or exiting by then
    # Rank 0's word on a job of a step-loop runner: the other ranks send nothing for it (they
    # mirror rank 0's loop and hold no outcome of their own), so the job is over.
    final: bool = False


@dataclass(frozen=True)
class Heartbeat:
    rank: int


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class Load:
    """To rank 0 while the group is idle: every rank drops its pipeline and loads the one these
    runner args name, in the processes it has (no relaunch: torch, the libraries and the process
    group stay); rank 0 answers `Ready` once every rank holds it, a rank that cannot load sends
    `StartFailed` and the group exits, as at start."""

    runner_args: dict[str, Json]


Message: TypeAlias = (
    Hello | Ready | StartFailed | Job | Phase | Progress | PreviewFrame | Cancel | Hold
    | Result | Failure | Heartbeat | Shutdown | Load
)
_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        Hello, Ready, StartFailed, Job, Phase, Progress, PreviewFrame, Cancel, Hold, Result,
        Failure, Heartbeat, Shutdown, Load,
    )
}


class ProtocolError(ValueError):
    """A frame that does not decode into a known message."""


def encode(message: Message) -> bytes:
    blobs: list[bytes | memoryview] = []
    fields = {f.name: _pack(getattr(message, f.name), blobs) for f in dataclasses.fields(message)}
    header = json.dumps(
        {"type": type(message).__name__, "fields": fields, "blobs": [len(b) for b in blobs]},
        separators=(",", ":"),
        allow_nan=False,
    ).encode()
    return b"".join([_HEADER.pack(len(header)), header, *blobs])


def decode(frame: bytes) -> Message:
    try:
        (size,) = _HEADER.unpack_from(frame)
        header = json.loads(frame[_HEADER.size : _HEADER.size + size])
        view = memoryview(frame)
        offset = _HEADER.size + size
        blobs: list[memoryview] = []
        for length in header["blobs"]:
            blobs.append(view[offset : offset + length])
            offset += length
        cls = _TYPES[header["type"]]
        fields = {k: _unpack(v, blobs) for k, v in header["fields"].items()}
        message: Message = cls(**fields)
    except (KeyError, TypeError, ValueError, struct.error) as exc:
        raise ProtocolError(f"bad frame: {exc}") from exc
    return message


def _pack(value: object, blobs: list[bytes | memoryview]) -> Json:
    if isinstance(value, bytes):
        blobs.append(value)
        return {"$blob": len(blobs) - 1}
    if isinstance(value, bytearray | memoryview):
        blobs.append(bytes(cast("bytearray | memoryview[int]", value)))
        return {"$blob": len(blobs) - 1}
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(cast(Array, value))
        if array.dtype.hasobject:
            raise TypeError("object arrays cannot cross the worker boundary")
        blobs.append(array.data.cast("B"))  # the array's own memory: no copy before the send
        return {"$array": len(blobs) - 1, "dtype": array.dtype.str, "shape": list(array.shape)}
    if isinstance(value, dict):
        out: dict[str, Json] = {}
        for key, item in cast(dict[object, object], value).items():
            if not isinstance(key, str) or key.startswith("$"):
                raise TypeError(f"message keys must be plain strings, got {key!r}")
            out[key] = _pack(item, blobs)
        return out
    if isinstance(value, list | tuple):
        return [_pack(item, blobs) for item in cast(list[object], value)]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"{type(value).__name__} cannot cross the worker boundary")


def _unpack(value: object, blobs: list[memoryview]) -> object:
    if isinstance(value, dict):
        fields = cast(dict[str, object], value)
        blob = fields.get("$blob")
        if isinstance(blob, int):
            return bytes(blobs[blob])
        index = fields.get("$array")
        if isinstance(index, int):
            dtype = np.dtype(str(fields["dtype"]))
            shape = tuple(int(n) for n in cast(list[int], fields["shape"]))
            # Read-only view onto the received frame: no copy for large pixel or latent arrays.
            return np.frombuffer(blobs[index], dtype=dtype).reshape(shape)
        return {k: _unpack(v, blobs) for k, v in fields.items()}
    if isinstance(value, list):
        return [_unpack(v, blobs) for v in cast(list[object], value)]
    return value
