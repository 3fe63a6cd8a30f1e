"""A request's LoRA stack as it crosses the job wire (torch-free).

Each `LoraUse` names a file by path and identity (what changes when the file does) and the
strength it is applied at. Ranks of a worker group load the same files by path, so a new LoRA
never restarts the group.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoraUse:
    name: str  # its name in loras/ (for messages and take params)
    path: str
    identity: str
    strength: float
    # On the text encoders, for a family whose LoRAs adapt them (ComfyUI LoraLoader's
    # strength_clip); None: `strength`.
    clip_strength: float | None = None

    @property
    def text_strength(self) -> float:
        return self.strength if self.clip_strength is None else self.clip_strength

    def to_info(self) -> dict[str, object]:
        info: dict[str, object] = {"name": self.name, "strength": self.strength}
        if self.clip_strength is not None:
            info["strength_clip"] = self.clip_strength
        return info


LoraStack = tuple[LoraUse, ...]


def stack_info(stack: LoraStack) -> list[dict[str, object]]:
    """The stack as a take records it."""
    return [use.to_info() for use in stack]
