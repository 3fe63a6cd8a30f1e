"""Nodes the importer cannot carry over that change the picture: which it refuses, and how it
says the others were dropped.

A node on the way to the image that has no equivalent here is passed straight through (as
ComfyUI's bypass does). That always changes what is rendered, so the answer lists it under
`changesPicture`, never only among the warnings. A node whose whole point is lost that way (a
ControlNet, an image prompt) refuses the import instead: the rest would be another workflow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inline_core.errors import InvalidRequest

# Conditioning from an image that Inline Core cannot apply yet: without it, the workflow is
# plain text-to-image.
REFUSED = re.compile(
    r"ControlNet|IPAdapter|StyleModel|T2IAdapter|InstantID|PuLID|PhotoMaker", re.IGNORECASE
)
LORA = re.compile(r"lora", re.IGNORECASE)


class UnsupportedNode(InvalidRequest):
    code = "unsupported_node"


@dataclass(frozen=True)
class Change:
    node_id: str
    class_type: str
    reason: str
    dropped: bool = True  # False: the node is carried over with a substitute (a sampler)

    def to_json(self) -> dict[str, str]:
        return {"nodeId": self.node_id, "classType": self.class_type, "reason": self.reason}

    def warning(self) -> str:
        if not self.dropped:
            return f"changes the picture: {self.class_type} {self.node_id}: {self.reason}"
        return f"changes the picture: {self.class_type} {self.node_id} was dropped ({self.reason})"


def refusal(class_type: str, where: str) -> str | None:
    """Why a workflow that needs `class_type` on its way to the image is refused; None if the
    node may be dropped (and marked)."""
    if REFUSED.search(class_type) is None:
        return None
    return (
        f"{where} conditions the picture on an image (a ControlNet, an image prompt), which "
        "Inline Core cannot apply yet; without it the workflow would render plain "
        "text-to-image, so it is not imported. Remove or bypass the node in ComfyUI to import "
        "the rest"
    )


def change_reason(class_type: str) -> str:
    if LORA.search(class_type):
        return (
            f"Inline Core maps LoraLoaderModelOnly and LoraLoader, not {class_type!r}: the "
            "model renders without this LoRA"
        )
    return f"Inline Core has no {class_type!r}: what it does to the picture is lost"
