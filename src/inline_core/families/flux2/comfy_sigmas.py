"""FLUX.2's sigmas node for ComfyUI's custom sampling onto `sample` (the recipe's
`sigma_sources`): `Flux2Scheduler` is the `simple` schedule at FLUX.2's empirical shift `mu` for
its own steps, width and height, as ComfyUI computes it, whatever the model's sampling says."""

from __future__ import annotations

from inline_core.families.flux2.comfy import SCHEDULER
from inline_core.families.flux2.shift import scheduler_mu
from inline_core.importer.mapper import Mapper, SigmaSource
from inline_core.importer.sigma_sources import Sigmas
from inline_core.importer.values import Value
from inline_core.importer.workflow import ComfyNode

SIDE = 1024  # ComfyUI's default width and height


def flux2_scheduler(m: Mapper, node: ComfyNode, model: Value | None) -> Sigmas:
    steps = m.whole(node, "steps", 20)
    mu = scheduler_mu(steps, m.whole(node, "width", SIDE), m.whole(node, "height", SIDE))
    return Sigmas("simple", steps, 1.0, {"mu": mu})


SIGMA_SOURCES: dict[str, SigmaSource] = {SCHEDULER: flux2_scheduler}
