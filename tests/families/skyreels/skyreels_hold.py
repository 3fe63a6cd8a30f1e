"""A test plugin for a real server process (`INLINE_PLUGINS=...,skyreels_hold:register`): while
the file named by `SKYREELS_HOLD_FILE` exists and holds a chunk number, a SkyReels-V2 forward
of a request on that chunk waits (the render stands inside the chunk: its `chunk_started` event
is out, its boundary not reached). A test sends interactions or kills the server there,
whatever the machine's load. The forward itself is the real one."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inline_core.graph.registry import Registry

HOLD_LIMIT_S = 120.0  # a held render goes on by itself after this (no test may hang a run)
HERE = Path(__file__).resolve().parent


def hold_env(hold: Path) -> dict[str, str]:
    """A live server's environment with this plugin loaded (beside the server tests' nodes),
    holding renders at the chunk `hold` names while it exists; float32."""
    from tests.server.server_support import HERE as SERVER_TESTS
    from tests.server.server_support import SRC

    return {
        "INLINE_DTYPE": "float32",
        "INLINE_PLUGINS": "server_nodes:register,skyreels_hold:register",
        "SKYREELS_HOLD_FILE": str(hold),
        "PYTHONPATH": os.pathsep.join([str(SRC), str(SERVER_TESTS), str(HERE)]),
    }


def held_chunk(hold: Path) -> int | None:
    try:
        return int(hold.read_text())
    except (OSError, ValueError):
        return None


def register(registry: Registry) -> None:
    del registry  # it registers no node: it only holds renders
    named = os.environ.get("SKYREELS_HOLD_FILE")
    if not named:
        return
    hold = Path(named)
    from inline_core.families.skyreels.pipeline import SkyReelsStepPipeline

    denoise = SkyReelsStepPipeline.denoise_step

    def held_denoise(self: SkyReelsStepPipeline, states: Sequence[Any], /) -> Any:
        deadline = time.monotonic() + HOLD_LIMIT_S
        while time.monotonic() < deadline and held_chunk(hold) in {s.chunk for s in states}:
            time.sleep(0.01)
        return denoise(self, states)

    SkyReelsStepPipeline.denoise_step = held_denoise  # pyright: ignore[reportAttributeAccessIssue]
