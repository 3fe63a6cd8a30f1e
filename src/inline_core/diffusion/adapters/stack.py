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

    def to_info(self) -> dict[str, object]:
        return {"name": self.name, "strength": self.strength}


LoraStack = tuple[LoraUse, ...]


def stack_info(stack: LoraStack) -> list[dict[str, object]]:
    """The stack as a take records it."""
    return [use.to_info() for use in stack]
