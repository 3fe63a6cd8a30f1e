"""ComfyUI sampler and scheduler names onto the `sample` node's, one to one.

Names are ComfyUI's (`euler`, `simple`, ...), so a name the node offers maps onto itself. A name it
does not offer is refused with a 422 naming it and the closest offered one: a workflow never
renders with a sampler or schedule its author did not pick.
"""

from __future__ import annotations

from collections.abc import Sequence

from inline_core.errors import InvalidRequest
from inline_core.graph.sampler_names import closest


def exact_name(kind: str, wanted: str, offered: Sequence[str], where: str) -> str:
    """`wanted` itself if the node offers it; otherwise a refusal naming it and the closest."""
    if not offered or wanted in offered:
        return wanted
    nearest = closest(wanted, tuple(offered))
    raise InvalidRequest(
        f"{where}: the {kind} {wanted!r} is not offered here; the closest offered is {nearest!r} "
        f"(offered: {', '.join(offered)}). Nothing is swapped for it: pick one in the workflow."
    )
