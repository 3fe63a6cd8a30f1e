"""The names a descriptor is written with: port kinds and param widgets.

They are the server's own vocabulary (its `PortKind` and `ParamWidget`); the server refuses a pack
whose descriptors use any other name, so a typo fails at install, not when a graph runs.
"""

from __future__ import annotations

from typing import Literal

PortKindName = Literal["image", "image[]", "mask", "video", "audio", "text", "number"]
PORT_KINDS: tuple[PortKindName, ...] = (
    "image",
    "image[]",
    "mask",
    "video",
    "audio",
    "text",
    "number",
)
WidgetName = Literal["text", "textarea", "number", "boolean", "select", "seed"]
# Media kinds a pack output may become a take of (the server stores and serves them).
TAKE_KINDS: frozenset[str] = frozenset({"image", "mask", "video", "audio"})
