"""A test plugin for a real server process (`INLINE_PLUGINS=...,wan_hold:register`): while the
file named by `WAN_HOLD_FILE` exists, every live video's decode waits once it has handed over
its second chunk (frames 0-4: their `chunk` events are out and a stream plays frames 0-3, its
take is not written). A test streams or kills the server there, mid-decode, whatever the
machine's load. The decode itself is the real one."""

from __future__ import annotations

import os
import time
from pathlib import Path

from inline_core.graph.registry import Registry
from inline_core.runtime.video import Frames
from inline_core.runtime.video_stream import LiveVideo

HOLD_AFTER = 2  # chunks handed over before the decode waits
HOLD_LIMIT_S = 120.0  # a held decode goes on by itself after this (no test may hang a run)
HERE = Path(__file__).resolve().parent


def hold_env(hold: Path) -> dict[str, str]:
    """A live server's environment with this plugin loaded (beside the server tests' nodes),
    holding decodes while `hold` exists; float32, as every Wan test renders."""
    from tests.server.server_support import HERE as SERVER_TESTS
    from tests.server.server_support import SRC

    return {
        "INLINE_DTYPE": "float32",
        "INLINE_PLUGINS": "server_nodes:register,wan_hold:register",
        "WAN_HOLD_FILE": str(hold),
        "PYTHONPATH": os.pathsep.join([str(SRC), str(SERVER_TESTS), str(HERE)]),
    }


def register(registry: Registry) -> None:
    del registry  # it registers no node: it only holds decodes
    named = os.environ.get("WAN_HOLD_FILE")
    if not named:
        return
    hold = Path(named)
    add = LiveVideo.add

    def held_add(self: LiveVideo, frames: Frames) -> None:
        add(self, frames)
        if len(self.chunks_after(0, timeout=0)[0]) < HOLD_AFTER:
            return
        deadline = time.monotonic() + HOLD_LIMIT_S
        while hold.exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    LiveVideo.add = held_add  # pyright: ignore[reportAttributeAccessIssue]
