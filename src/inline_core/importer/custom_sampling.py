"""ComfyUI's custom sampling onto `sample`: `SamplerCustom` and `SamplerCustomAdvanced`, with
`KSamplerSelect`'s sampler, `BasicScheduler`'s, `KarrasScheduler`'s or `BetaSamplingScheduler`'s
sigmas (or a family's own sigmas node, its recipe's), either half of a `SplitSigmas` or
`SplitSigmasDenoise` of them as a window of the schedule, `RandomNoise`'s seed and
`CFGGuider`'s or `BasicGuider`'s model, prompts and cfg. Each maps exactly onto one of the sigma
library's samplers and schedules, or the workflow is refused naming what it asked for and the
closest we have: nothing is swapped."""

from __future__ import annotations

import math
from typing import Any

from inline_core.graph.schema import PortKind
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.mapper import Mapper, SigmaSource
from inline_core.importer.sampling import add_sample, model_shift, select
from inline_core.importer.sigma_sources import Sigmas
from inline_core.importer.values import Value, describe
from inline_core.importer.workflow import ComfyNode, Link

# ComfyUI's KarrasScheduler defaults: an SD model's sigma range (its scaled-linear betas).
DISCRETE_RANGE = (14.614642, 0.0291675)
KARRAS_RHO = 7.0
BETA_SHAPE = 0.6  # the library's `beta` schedule: ComfyUI's alpha and beta defaults
TRAIN_TIMESTEPS = 1000
FLUX_TIMESTEPS = 10000  # ModelSamplingFlux's table
SPLITS = ("SplitSigmas", "SplitSigmasDenoise")


def linked(m: Mapper, node: ComfyNode, name: str, classes: tuple[str, ...]) -> ComfyNode:
    """The node wired into `name`, one of `classes`; anything else is refused naming it."""
    raw = node.inputs.get(name)
    source = m.workflow.nodes.get(raw.node) if isinstance(raw, Link) else None
    if source is None:
        raise UnsupportedNode(f"{describe(node)}: its {name} input is not connected")
    if source.class_type not in classes:
        raise UnsupportedNode(
            f"{describe(node)}: its {name} comes from {describe(source)}, which `sample` "
            f"cannot run; it takes {name} from {' or '.join(classes)}"
        )
    m.mark_used(source.id)
    return source


def sampler_name(m: Mapper, node: ComfyNode) -> str:
    chosen = linked(m, node, "sampler", ("KSamplerSelect",))
    return select(m, chosen, "sampler_name", "sampler", "euler")


def flow_range(shift: float) -> tuple[float, float]:
    """A flow model's sigma range at `shift`: 1 down to its shifted first timestep."""
    t = 1 / TRAIN_TIMESTEPS
    return 1.0, shift * t / (1 + (shift - 1) * t)


def flux_range(mu: float) -> tuple[float, float]:
    """ModelSamplingFlux's sigma range at `mu`: 1 down to the first of its 10000 timesteps."""
    t = 1 / FLUX_TIMESTEPS
    return 1.0, math.exp(mu) / (math.exp(mu) + (1 / t - 1))


def sigmas_of(m: Mapper, node: ComfyNode, model: Value | None) -> Sigmas:
    """The sampler's sigmas: a sigmas node's, or one half of a split of them (a window)."""
    sources = {**CORE_SIGMAS, **{k: v for k, v in m.sigma_sources.items() if k not in CORE_SIGMAS}}
    raw = node.inputs.get("sigmas")
    split = m.workflow.nodes.get(raw.node) if isinstance(raw, Link) else None
    if split is None or split.class_type not in SPLITS:
        source = linked(m, node, "sigmas", tuple(sources))
        return sources[source.class_type](m, source, model)
    m.mark_used(split.id)
    source = linked(m, split, "sigmas", tuple(sources))
    whole = sources[source.class_type](m, source, model)
    return window_of(m, split, raw.slot if isinstance(raw, Link) else 0, whole)


def window_of(m: Mapper, split: ComfyNode, half: int, whole: Sigmas) -> Sigmas:
    """A SplitSigmas' (at `step`) or SplitSigmasDenoise's (the last `denoise` of the steps)
    half of `whole`'s schedule as `sample`'s window: the high sigmas (slot 0) end there with
    their leftover noise, the low ones (slot 1) start there, the start latent noised to it."""
    if split.class_type == "SplitSigmas":
        at = m.whole(split, "step", 0)
    else:
        at = whole.steps - round(whole.steps * m.number(split, "denoise", 1.0))
    if whole.params.keys() & {"start_step", "end_step"} or not 0 < at < whole.steps:
        raise UnsupportedNode(
            f"{describe(split)}: splits {whole.steps} steps at step {at}, which leaves a half "
            "without steps, or splits a schedule already split; `sample` runs one window of "
            "one schedule"
        )
    window = {"end_step": at, "leftover_noise": True} if half == 0 else {"start_step": at}
    return Sigmas(whole.scheduler, whole.steps, whole.denoise, {**whole.params, **window})


def basic_scheduler(m: Mapper, source: ComfyNode, model: Value | None) -> Sigmas:
    steps = m.whole(source, "steps", 20)
    scheduler = select(m, source, "scheduler", "scheduler", "simple")
    return Sigmas(scheduler, steps, m.number(source, "denoise", 1.0))


def beta_scheduler(m: Mapper, source: ComfyNode, model: Value | None) -> Sigmas:
    shape = (m.number(source, "alpha", BETA_SHAPE), m.number(source, "beta", BETA_SHAPE))
    if shape != (BETA_SHAPE, BETA_SHAPE):
        raise UnsupportedNode(
            f"{describe(source)}: the beta schedule with alpha {shape[0]:g} and beta "
            f"{shape[1]:g} is not offered; the closest offered is 'beta' (alpha and beta "
            f"{BETA_SHAPE:g})"
        )
    return Sigmas("beta", m.whole(source, "steps", 20), 1.0)


def karras_scheduler(m: Mapper, source: ComfyNode, model: Value | None) -> Sigmas:
    wanted = (m.number(source, "sigma_max", 14.614642), m.number(source, "sigma_min", 0.0291675))
    rho = m.number(source, "rho", KARRAS_RHO)
    shift = model.shift if model is not None and model.shift is not None else None
    if shift is None and model is not None and model.mu is None:
        shift = model_shift(m, model)
    if model is not None and model.mu is not None:
        own = flux_range(model.mu)
    else:
        own = flow_range(shift) if shift is not None else DISCRETE_RANGE
    same = all(math.isclose(a, b, rel_tol=1e-4) for a, b in zip(wanted, own, strict=True))
    if not same or rho != KARRAS_RHO:
        raise UnsupportedNode(
            f"{describe(source)}: Karras sigmas from {wanted[0]:g} to {wanted[1]:g} with rho "
            f"{rho:g} are not offered; the closest offered is 'karras' over the model's own "
            f"range ({own[0]:g} to {own[1]:g}, rho {KARRAS_RHO:g})"
        )
    return Sigmas("karras", m.whole(source, "steps", 20), 1.0)


CORE_SIGMAS: dict[str, SigmaSource] = {
    "BasicScheduler": basic_scheduler,
    "KarrasScheduler": karras_scheduler,
    "BetaSamplingScheduler": beta_scheduler,
}


def sampler_custom(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    if not output_only(m, node, slot):
        return None
    if m.literal(node, "add_noise") not in (None, True, "enable"):
        m.skip(node, "it samples without adding noise, which `sample` cannot do")
        return None
    model = m.input_value(node, "model", PortKind.MODEL)
    cfg = m.number(node, "cfg", 8.0)
    return emit(
        m,
        node,
        model,
        cfg,
        m.whole(node, "noise_seed", 0),
        positive=m.input_value(node, "positive", PortKind.CONDITIONING),
        negative=m.input_value(node, "negative", PortKind.CONDITIONING, optional=True),
    )


def sampler_custom_advanced(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    if not output_only(m, node, slot):
        return None
    noise = linked(m, node, "noise", ("RandomNoise", "DisableNoise"))
    if noise.class_type == "DisableNoise":
        m.skip(node, "it samples without adding noise (DisableNoise), which `sample` cannot do")
        return None
    guider = linked(m, node, "guider", ("CFGGuider", "BasicGuider"))
    model = m.input_value(guider, "model", PortKind.MODEL)
    seed = m.whole(noise, "noise_seed", 0)
    if guider.class_type == "BasicGuider":
        positive = m.input_value(guider, "conditioning", PortKind.CONDITIONING)
        return emit(m, node, model, 1.0, seed, positive=positive, negative=None)
    return emit(
        m,
        node,
        model,
        m.number(guider, "cfg", 8.0),
        seed,
        positive=m.input_value(guider, "positive", PortKind.CONDITIONING),
        negative=m.input_value(guider, "negative", PortKind.CONDITIONING, optional=True),
    )


def output_only(m: Mapper, node: ComfyNode, slot: int) -> bool:
    """Only the sampled latent (slot 0) maps; `denoised_output` is the last step's estimate."""
    if slot == 0:
        return True
    m.skip(node, "its denoised_output (the last step's estimate) is not offered by `sample`")
    return False


def emit(
    m: Mapper,
    node: ComfyNode,
    model: Value | None,
    cfg: float,
    seed: int,
    *,
    positive: Value | None,
    negative: Value | None,
) -> Value:
    sigmas = sigmas_of(m, node, model)
    params: dict[str, Any] = {
        "steps": sigmas.steps,
        "cfg": float(m.fit("sample", "cfg", cfg, describe(node))),
        "sampler": sampler_name(m, node),
        "scheduler": sigmas.scheduler,
        "seed": seed,
        "denoise": sigmas.denoise,
        **sigmas.params,
    }
    latent = m.input_value(node, "latent_image", PortKind.LATENT)
    return add_sample(
        m, node, params, model=model, positive=positive, negative=negative, latent=latent
    )


def model_sampling_discrete(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """A discrete-time model's own sampling (epsilon, no zero-terminal-SNR rescale) passes the
    model on; any other is refused: `sample` samples a model as its family reads it."""
    model = m.input_value(node, "model", PortKind.MODEL)
    if model is None:
        return None
    where = describe(node)
    sampling = m.text(node, "sampling", "eps")
    if sampling != "eps" or m.literal(node, "zsnr") not in (None, False):
        raise UnsupportedNode(
            f"{where}: sampling {sampling!r}"
            f"{' with zsnr' if sampling == 'eps' else ''} is not offered; the closest offered "
            "is 'eps' without zsnr (the model's own discrete sampling)"
        )
    if model_shift(m, model) is not None or model.shift is not None or model.mu is not None:
        raise UnsupportedNode(
            f"{where}: a flow model's sampling is its shift; set it with ModelSamplingSD3, "
            "ModelSamplingAuraFlow or ModelSamplingFlux"
        )
    return model


HANDLERS = {
    "SamplerCustom": sampler_custom,
    "SamplerCustomAdvanced": sampler_custom_advanced,
    "ModelSamplingDiscrete": model_sampling_discrete,
}
