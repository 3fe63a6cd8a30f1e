"""How a worker group's rank rebuilds a family's pipeline from a spec (imports torch).

The server names the stack as plain values (`engine/group.py` `rank_spec`: the family, which stack,
its files, each role's dtype); every rank finds the family through the same entry points and builds
the stack with the family's own builder, through the same loaders as the in-process path, on its
own device, without residency (a rank holds one stack).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.contract.builder import FamilyBuilder, Parts
from inline_core.contract.discovery import family_named, load_builder
from inline_core.contract.sources import Sources
from inline_core.device import Placement
from inline_core.diffusion.placement import OffloadSwap
from inline_core.engine.adopt import with_step_cache
from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import PipelineSpec


def load_for_rank(
    *,
    device: str,
    family: str,
    stack: str,
    sources: Mapping[str, Json],
    dtypes: Mapping[str, Json],
) -> Any:
    """The rank's resident pipeline (the `PipelineSpec` loader): `stack` on `device`."""
    found = family_named(family)
    builder: FamilyBuilder = load_builder(found)
    files = Sources.from_json(sources)
    placements = {role: Placement(device, str(dtype)) for role, dtype in dtypes.items()}
    values: dict[str, Any] = {}
    for part, source in files.parts:
        role = builder.roles.get(part)
        if role is not None and role not in placements:
            continue  # a part this stack does not place (the denoiser alone has no VAE)
        values[part] = builder.load(part, source, None if role is None else placements[role])
    spec = PipelineSpec(
        "inline_core.engine.remote:load_for_rank",
        {"family": family, "stack": stack, "sources": dict(sources), "dtypes": dict(dtypes)},
    )
    parts = Parts(values, placements, OffloadSwap(), model_key=spec.key, remote=spec)
    made = builder.denoiser(parts) if stack == "denoiser" else builder.pipeline(parts)
    return with_step_cache(builder, parts, made)
