"""What a family's node is checked with at submit, in one call (torch-free).

The node's files are resolved once (`resolution`); the family's check reads them from here, and
the same `Sources` reach `Family.lower` and the render, so a run resolves its files one time.
The check sees no seed and no text wired in (an `input/text`'s prompt): those change render to
render, and what the check finds from the rest is kept across them
(`families/nodes/family_node.py`).
A family that checks texts at submit does so through its own hook (`contract/supports.py`:
`ChecksTexts`), asked on every submit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inline_core.contract.sources import Resolution, Sources
from inline_core.graph.params import CheckParams

# The seed a `Submit` built from plain params leaves out (the family node leaves out every param
# its descriptor marks as a seed).
SEED = "seed"


@dataclass(frozen=True)
class Submit:
    """A family node at submit: its params (never its seeds: a `CheckParams` view), its files as
    resolved, the inputs wired, the sizes of the images wired in that are known at submit, and
    what the nodes wired in prepared (their handles: never a text)."""

    node_type: str
    params: Mapping[str, Any]
    node_id: str
    resolution: Resolution
    wired: frozenset[str]
    sizes: Mapping[str, tuple[int, int]]
    upstream: Mapping[str, Sequence[object]]

    def __post_init__(self) -> None:
        if not isinstance(self.params, CheckParams):  # plain params: the seed left out here
            object.__setattr__(self, "params", CheckParams(self.params, frozenset({SEED})))

    @property
    def sources(self) -> Sources | None:
        """The files found (None: some are missing; the node is then refused as
        `model_missing` once the family's own checks of its params have run)."""
        return self.resolution.sources

    @property
    def loras(self) -> list[object]:
        """What is wired into the node's `loras` input (`input/lora` handles), in edge order."""
        return list(self.upstream.get("loras", ()))
