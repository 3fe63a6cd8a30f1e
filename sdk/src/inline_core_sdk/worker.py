"""The pack's worker process: serves the server's calls over the socket it was handed.

The main thread reads frames and runs each call itself; while a call runs, a listener thread
reads the frames that arrive (`listener.py`), so a `cancel` reaches the node mid-work. Images
come and go through the arena the server handed over (`arena.py`). The worker never sees the
server's memory, database or token: it is started with a clean environment, no inherited
descriptors but its socket and its arena, and a scratch folder as its home.
"""

from __future__ import annotations

import faulthandler
import socket
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from inline_core_sdk.arena import Arena, ArenaImage
from inline_core_sdk.call import Call, Cancelled
from inline_core_sdk.image_ref import ImageRef
from inline_core_sdk.listener import CallListener
from inline_core_sdk.media import from_wire
from inline_core_sdk.nodes import Node
from inline_core_sdk.outputs import encode_outputs
from inline_core_sdk.protocol import ProtocolError, read_frame, send_frame
from inline_core_sdk.version import PROTOCOL_VERSION, sdk_version

MAX_TRACEBACK_CHARS = 4000


def _input(raw: object, arena: Arena | None) -> object:
    value = from_wire(raw)
    if not isinstance(value, ArenaImage):
        return value
    if arena is None or value.path is None:
        raise ValueError("an input names the arena, and this worker was given none")
    return ImageRef.in_arena(
        arena.inputs, value.offset, value.path, value.width, value.height, value.mode, value.kind
    )


def _inputs(raw: Mapping[str, Any], arena: Arena | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for port, value in raw.items():
        if isinstance(value, list):
            out[port] = [_input(v, arena) for v in cast(list[object], value)]
        else:
            out[port] = _input(value, arena)
    return out


class Worker:
    def __init__(
        self, sock: socket.socket, nodes: Mapping[str, Node], arena: Arena | None = None
    ) -> None:
        self.sock = sock
        self.nodes = nodes
        self.arena = arena
        self._send_lock = threading.Lock()
        self._listener = CallListener(sock)

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
        self._listener.start()
        while not self._listener.shutdown:
            try:
                message = read_frame(self.sock)
            except ProtocolError:
                return  # the server went away: nothing left to serve
            kind = message["type"]
            if kind == "shutdown":
                return
            if kind == "call":
                self._run(message)
            # A cancel read here came after its call answered: there is nothing to stop.

    def _run(self, message: dict[str, Any]) -> None:
        call_id = int(message["id"])
        cancel = threading.Event()
        with self._listener.during(call_id, cancel):
            answer = self._answer(call_id, message, cancel)
        try:
            self.send(answer)
        except (OSError, ProtocolError):
            return  # the server went away or refused the frame: nobody to tell

    def _answer(
        self, call_id: int, message: dict[str, Any], cancel: threading.Event
    ) -> dict[str, Any]:
        def report(progress: dict[str, Any]) -> None:
            self.send({**progress, "id": call_id})

        try:
            node = self.nodes[str(message["node"])]
            out_dir = Path(str(message["out"]))
            call = Call(
                params=cast(dict[str, Any], message.get("params", {})),
                inputs=_inputs(cast(dict[str, Any], message.get("inputs", {})), self.arena),
                scratch=out_dir,
                report=report,
                cancel_event=cancel,
            )
            outputs = node.run(call)
            arena = self.arena.outputs if self.arena is not None else None
            encoded = encode_outputs(node, outputs, out_dir, arena)
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


def serve(fd: int, nodes: Mapping[str, Node], arena_fd: int | None = None) -> None:
    faulthandler.enable()  # a segfault leaves its Python stack in the worker's log
    sock = socket.socket(fileno=fd)
    arena = Arena.from_fd(arena_fd) if arena_fd is not None else None
    try:
        Worker(sock, nodes, arena).serve()
    finally:
        sock.close()
