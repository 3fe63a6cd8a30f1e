"""The pack's worker process: serves the server's calls over the socket it was handed.

The main thread reads frames; each call runs on its own thread so a `cancel` frame reaches the
node mid-work. The worker never sees the server's memory, database or token: it is started with
a clean environment, no inherited descriptors but its socket, and a scratch folder as its home.
"""

from __future__ import annotations

import faulthandler
import socket
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from inline_core_sdk.call import Call, Cancelled
from inline_core_sdk.media import ImageRef, MediaFile, from_wire, value_to_wire, write_image
from inline_core_sdk.nodes import Node
from inline_core_sdk.protocol import ProtocolError, read_frame, send_frame
from inline_core_sdk.version import PROTOCOL_VERSION, sdk_version

MAX_TRACEBACK_CHARS = 4000


class OutputError(TypeError):
    """A node returned something its declared outputs cannot carry."""


def _inputs(raw: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for port, value in raw.items():
        if isinstance(value, list):
            out[port] = [from_wire(v) for v in cast(list[object], value)]
        else:
            out[port] = from_wire(value)
    return out


def _media_file(value: object, kind: str, port: str) -> MediaFile:
    if isinstance(value, MediaFile):
        return value
    if isinstance(value, str | Path):
        return MediaFile(Path(value), kind)
    raise OutputError(f"output {port!r} ({kind}) must be a file path, got {type(value).__name__}")


def _encode_output(node: Node, port: str, value: object, out_dir: Path) -> object:
    spec = next((p for p in node.outputs if p.name == port), None)
    if spec is None:
        raise OutputError(f"output {port!r} is not declared by {type(node).__name__}")
    if spec.kind in ("image", "mask"):
        if isinstance(value, ImageRef):
            return value.to_wire()
        return write_image(value, out_dir / f"{port}.raw", spec.kind).to_wire()
    if spec.kind == "image[]":
        items = cast(list[object], value) if isinstance(value, list | tuple) else [value]
        return [
            item.to_wire() if isinstance(item, ImageRef)
            else write_image(item, out_dir / f"{port}-{i}.raw").to_wire()
            for i, item in enumerate(items)
        ]
    if spec.kind in ("video", "audio"):
        return _media_file(value, spec.kind, port).to_wire()
    if spec.kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise OutputError(f"output {port!r} must be a number, got {type(value).__name__}")
    if spec.kind == "text" and not isinstance(value, str):
        raise OutputError(f"output {port!r} must be text, got {type(value).__name__}")
    return value_to_wire(value)


class Worker:
    def __init__(self, sock: socket.socket, nodes: Mapping[str, Node]) -> None:
        self.sock = sock
        self.nodes = nodes
        self._send_lock = threading.Lock()
        self._cancels: dict[int, threading.Event] = {}

    def send(self, message: dict[str, Any]) -> None:
        with self._send_lock:
            send_frame(self.sock, message)

    def serve(self) -> None:
        self.send(
            {
                "type": "hello",
                "protocol": PROTOCOL_VERSION,
                "sdk": sdk_version(),
                "nodes": sorted(self.nodes),
            }
        )
        while True:
            try:
                message = read_frame(self.sock)
            except ProtocolError:
                return  # the server went away: nothing left to serve
            kind = message["type"]
            if kind == "shutdown":
                return
            if kind == "cancel":
                event = self._cancels.get(int(message.get("id", -1)))
                if event is not None:
                    event.set()
            elif kind == "call":
                call_id = int(message["id"])
                self._cancels[call_id] = threading.Event()
                threading.Thread(target=self._run, args=(message,), daemon=True).start()

    def _run(self, message: dict[str, Any]) -> None:
        call_id = int(message["id"])
        try:
            answer = self._answer(call_id, message)
        finally:
            self._cancels.pop(call_id, None)
        try:
            self.send(answer)
        except (OSError, ProtocolError):
            return  # the server went away or refused the frame: nobody to tell

    def _answer(self, call_id: int, message: dict[str, Any]) -> dict[str, Any]:
        def report(progress: dict[str, Any]) -> None:
            self.send({**progress, "id": call_id})

        try:
            node = self.nodes[str(message["node"])]
            out_dir = Path(str(message["out"]))
            call = Call(
                params=cast(dict[str, Any], message.get("params", {})),
                inputs=_inputs(cast(dict[str, Any], message.get("inputs", {}))),
                scratch=out_dir,
                report=report,
                cancel_event=self._cancels[call_id],
            )
            outputs = node.run(call)
            encoded = {port: _encode_output(node, port, v, out_dir) for port, v in outputs.items()}
            return {"type": "result", "id": call_id, "outputs": encoded}
        except Cancelled:
            return {"type": "cancelled", "id": call_id}
        except BaseException as exc:  # everything a node raises is reported, nothing kills us
            text = traceback.format_exc()[-MAX_TRACEBACK_CHARS:]
            return {
                "type": "error",
                "id": call_id,
                "message": f"{type(exc).__name__}: {exc}",
                "traceback": text,
            }


def serve(fd: int, nodes: Mapping[str, Node]) -> None:
    faulthandler.enable()  # a segfault leaves its Python stack in the worker's log
    sock = socket.socket(fileno=fd)
    try:
        Worker(sock, nodes).serve()
    finally:
        sock.close()
