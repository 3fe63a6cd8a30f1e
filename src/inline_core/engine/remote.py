"""How a worker group's rank rebuilds a family's pipeline from a spec (imports torch).

The server names the stack as plain values (`engine/group.py` `rank_spec`: the family, which stack,
its files, each role's dtype); every rank finds the family through the same entry points and builds
the stack with the family's own builder, through the same loaders as the in-process path, on its
own device, without residency (a rank holds one stack). Where the server compiles (the spec's
`compile`: its choice per role), the rank compiles the same blocks; each rank's result says how
they ran (`step_runner`), a failed compile eager and why. Where the server's policy packs the
denoiser's linear weights (the spec's `packed`: the rank's share of the memory budget), the rank
packs its own by the same rule as the stacks (`engine/packing.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, cast

from inline_core.contract.builder import DENOISER, VAE, FamilyBuilder, Parts, placed_as
from inline_core.contract.discovery import family_named, load_builder
from inline_core.contract.sources import Sources
from inline_core.device import Placement
from inline_core.device.compile import CompileChoice
from inline_core.device.matmul import RankPacking
from inline_core.diffusion.compile.regional import compile_decoders, compile_denoisers
from inline_core.diffusion.placement import OffloadSwap
from inline_core.engine.assemble import assemble
from inline_core.engine.packing import packing_load
from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import PipelineSpec


def load_for_rank(
    *,
    device: str,
    family: str,
    stack: str,
    sources: Mapping[str, Json],
    dtypes: Mapping[str, Json],
    compile: Mapping[str, Json] | None = None,
    packed: Mapping[str, Json] | None = None,
) -> Any:
    """The rank's resident pipeline (the `PipelineSpec` loader): `stack` on `device`, the blocks
    of the roles `compile` names compiled by its choice, the denoiser's linear weights packed
    where `packed` (a `RankPacking`) is given."""
    found = family_named(family)
    builder: FamilyBuilder = load_builder(found)
    files = Sources.from_json(sources)
    placements = {role: Placement(device, str(dtype)) for role, dtype in dtypes.items()}
    packing = None if packed is None else RankPacking.from_json(packed)
    values: dict[str, Any] = {}
    for part, source in files.parts:
        role = builder.roles.get(part)
        if role is not None and role not in placements:
            continue  # a part this stack does not place (the denoiser alone has no VAE)
        placement = None if role is None else placements[role]
        values[part] = packing_load(
            partial(builder.load, part, source, placement),
            role,
            placement,
            packs=packing is not None,
            budget_bytes=None if packing is None else packing.budget_bytes,
            name=f"{found.title} {part}",
        )()
    args: dict[str, Json] = {
        "family": family,
        "stack": stack,
        "sources": dict(sources),
        "dtypes": dict(dtypes),
    }
    if compile:
        args["compile"] = dict(compile)
    if packed is not None:
        args["packed"] = dict(packed)
    spec = PipelineSpec("inline_core.engine.remote:load_for_rank", args)
    parts = Parts(values, placements, OffloadSwap(), model_key=spec.key)
    made = assemble(builder, parts, "denoiser" if stack == "denoiser" else "node")
    choices = {
        role: CompileChoice.from_json(cast(Mapping[str, object], raw))
        for role, raw in (compile or {}).items()
    }
    if DENOISER in choices:
        compile_denoisers(placed_as(DENOISER, builder.roles, parts), choices[DENOISER], family)
    if VAE in choices:
        compile_decoders(placed_as(VAE, builder.roles, parts), choices[VAE], family)
    return made
