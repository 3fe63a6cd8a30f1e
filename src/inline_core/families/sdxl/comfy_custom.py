"""SDXL Turbo's template chain: SamplerCustom with KSamplerSelect's sampler and SDTurboScheduler's
(or BasicScheduler's) sigmas, read onto `stability/sdxl`'s sampler, schedule and steps exactly,
or refused naming the node: nothing is swapped for a near schedule.

SDTurboScheduler takes every 100th training timestep from 999 down (`steps` of them, starting
`10 - int(10 * denoise)` hundreds down), then 0. One step at denoise 1 is timestep 999 alone:
the sigmas `sgm_uniform` gives for one step (`linspace(999, 0, 2)[:-1]`), so that maps; any
other count or denoise picks timesteps no schedule here walks.
"""

from __future__ import annotations

from collections.abc import Callable

from inline_core.graph.sampler_names import GUIDED_SAMPLERS, SCHEDULES
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.mapper import Mapper
from inline_core.importer.own_node import Sampling
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode

CUSTOM = "SamplerCustom"
SELECT, BASIC, TURBO = "KSamplerSelect", "BasicScheduler", "SDTurboScheduler"
TURBO_SCHEDULE = "sgm_uniform"  # SDTurboScheduler's sigmas at one step, denoise 1


def turbo_timesteps(steps: int, denoise: float) -> list[int]:
    """SDTurboScheduler's training timesteps (ComfyUI's `comfy_extras/nodes_custom_sampler.py`)."""
    start = 10 - int(10 * denoise)
    return [999 - 100 * k for k in range(start, start + steps)]


def custom_sampling(
    m: Mapper, sampler: ComfyNode, required: Callable[[ComfyNode, str], ComfyNode]
) -> Sampling:
    """A SamplerCustom's seed, cfg, sampler and sigmas as the node's; `required` reads (and
    marks read) the node on an input."""
    if m.literal(sampler, "add_noise") is False:
        raise UnsupportedNode(
            f"{describe(sampler)}: add_noise off (sampling the latent as it comes) is not "
            "offered: stability/sdxl draws its noise from the seed"
        )
    chosen = required(sampler, "sampler")
    if chosen.class_type != SELECT:
        raise UnsupportedNode(f"{describe(chosen)}: only KSamplerSelect's samplers import")
    name = m.text(chosen, "sampler_name", "euler")
    if name not in GUIDED_SAMPLERS:
        raise UnsupportedNode(f"{describe(chosen)}: sampler {name!r} is not offered here")
    sigmas = required(sampler, "sigmas")
    if sigmas.inputs.get("model") != sampler.inputs.get("model"):
        raise UnsupportedNode(
            f"{describe(sigmas)} reads another model than {describe(sampler)}: its sigmas "
            "would be another model's"
        )
    steps, schedule = _schedule(m, sigmas)
    seed, cfg = m.whole(sampler, "noise_seed", 0), m.number(sampler, "cfg", 8.0)
    return Sampling(sampler, None, seed, steps, cfg, {"sampler": name, "schedule": schedule})


def _schedule(m: Mapper, node: ComfyNode) -> tuple[int, str]:
    denoise = m.number(node, "denoise", 1.0)
    if node.class_type == TURBO:
        steps = m.whole(node, "steps", 1)
        if steps == 1 and denoise == 1.0:
            return 1, TURBO_SCHEDULE
        picked = ", ".join(str(t) for t in turbo_timesteps(steps, denoise))
        raise UnsupportedNode(
            f"{describe(node)}: {steps} steps at denoise {denoise:g} walk the training "
            f"timesteps {picked}, which no schedule here walks (one step at denoise 1 imports, "
            "as sgm_uniform)"
        )
    if node.class_type == BASIC:
        scheduler = m.text(node, "scheduler", "normal")
        if scheduler not in SCHEDULES:
            raise UnsupportedNode(f"{describe(node)}: scheduler {scheduler!r} is not offered")
        if denoise != 1.0:
            raise UnsupportedNode(f"{describe(node)}: denoise {denoise:g} is not offered")
        return m.whole(node, "steps", 20), scheduler
    raise UnsupportedNode(
        f"{describe(node)}: only {TURBO}'s and {BASIC}'s sigmas import onto stability/sdxl"
    )
