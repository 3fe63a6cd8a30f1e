"""ComfyUI's latents, model sampling settings and samplers onto `latent/empty` and `sample`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from inline_core.diffusion.sigma.shift import flux_mu
from inline_core.graph.schema import PortKind
from inline_core.importer.conditioning import empty_prompt
from inline_core.importer.mapper import MODEL_WRAPPERS, Mapper
from inline_core.importer.samplers import exact_name
from inline_core.importer.values import Value, describe
from inline_core.importer.workflow import ComfyNode


def empty_latent(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    side = 1024 if node.class_type == "EmptySD3LatentImage" else 512
    params = {
        "width": m.whole(node, "width", side),
        "height": m.whole(node, "height", side),
        "batch": m.whole(node, "batch_size", 1),
    }
    port = m.add(f"c{node.id}", "latent/empty", params, {}, describe(node))
    return Value(PortKind.LATENT, port, node.id)


def model_sampling(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """ModelSamplingSD3 / ModelSamplingAuraFlow: the model sampled at `shift` (`sample`'s)."""
    model = m.input_value(node, "model", PortKind.MODEL)
    if model is None:
        return None
    default = 1.73 if node.class_type == "ModelSamplingAuraFlow" else 3.0  # ComfyUI's
    return replace(model, shift=m.number(node, "shift", default), mu=None, shift_node=node)


def model_sampling_flux(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """ModelSamplingFlux: the model sampled at the exponential shift `mu` ComfyUI computes from
    its max_shift, base_shift, width and height (`sample`'s `mu`)."""
    model = m.input_value(node, "model", PortKind.MODEL)
    if model is None:
        return None
    mu = flux_mu(
        m.number(node, "max_shift", 1.15),
        m.number(node, "base_shift", 0.5),
        m.whole(node, "width", 1024),
        m.whole(node, "height", 1024),
    )
    return replace(model, shift=None, mu=mu, shift_node=node)


def shift_params(m: Mapper, model: Value) -> dict[str, float]:
    """The ModelSampling* shift on the model's way as `sample`'s `shift` or `mu`; nothing where
    it is the model's own flow shift (the same schedule)."""
    if model.mu is not None:
        return {"mu": model.mu}
    if model.shift is None:
        return {}
    own = model_shift(m, model)
    if own is not None and math.isclose(model.shift, own):
        return {}
    return {"shift": model.shift}


def model_shift(m: Mapper, model: Value) -> float | None:
    """The flow shift of the diffusion model a `model` value was loaded from, as the model
    families this server runs know it."""
    draft = None if model.port is None else m.drafts.get(model.port.node)
    while draft is not None and draft.type in MODEL_WRAPPERS:  # the model it adapts
        draft = m.drafts.get(draft.inputs["model"][0].node)
    if m.facts is None or draft is None or draft.type != "load/diffusion-model":
        return None
    return m.facts.flow_shift(str(draft.params.get("file", "")))


def ksampler(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    return sample(m, node, seed_name="seed", denoise=m.number(node, "denoise", 1.0))


def ksampler_advanced(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    """Its window of the schedule onto `sample`'s (start_step, end_step, add_noise,
    leftover_noise): the model's family runs it or refuses it, naming it."""
    window = {
        "start_step": m.whole(node, "start_at_step", 0),
        "end_step": m.whole(node, "end_at_step", 10000),
        "add_noise": m.text(node, "add_noise", "enable") != "disable",
        "leftover_noise": m.text(node, "return_with_leftover_noise", "disable") == "enable",
    }
    whole = window["start_step"] == 0 and window["end_step"] >= m.whole(node, "steps", 20)
    if whole and window["add_noise"] and not window["leftover_noise"]:
        window = {}  # the whole schedule from noise: a plain sample
    return sample(m, node, seed_name="noise_seed", denoise=1.0, window=window)


def sample(
    m: Mapper,
    node: ComfyNode,
    *,
    seed_name: str,
    denoise: float,
    window: Mapping[str, Any] | None = None,
) -> Value | None:
    cfg = float(m.fit("sample", "cfg", m.number(node, "cfg", 8.0), describe(node)))
    params: dict[str, Any] = {
        "steps": m.whole(node, "steps", 20),
        "cfg": cfg,
        "sampler": select(m, node, "sampler_name", "sampler", "euler"),
        "scheduler": select(m, node, "scheduler", "scheduler", "simple"),
        "seed": m.whole(node, seed_name, 0),
        "denoise": denoise,
        **(window or {}),
    }
    return add_sample(
        m,
        node,
        params,
        model=m.input_value(node, "model", PortKind.MODEL),
        positive=m.input_value(node, "positive", PortKind.CONDITIONING),
        negative=m.input_value(node, "negative", PortKind.CONDITIONING, optional=True),
        latent=m.input_value(node, "latent_image", PortKind.LATENT),
    )


def add_sample(
    m: Mapper,
    node: ComfyNode,
    params: dict[str, Any],
    *,
    model: Value | None,
    positive: Value | None,
    negative: Value | None,
    latent: Value | None,
) -> Value:
    """One `sample` node for the ComfyUI node that samples, with the values read off it (or off
    the custom sampling nodes it is wired to)."""
    where = describe(node)
    cfg = float(params["cfg"])
    if model is not None and not params.keys() & {"shift", "mu"}:
        # A shift the sigmas set (a family's own sigmas node) is absolute: the model's is not read.
        params = dict(params) | shift_params(m, model)
    encoder = positive.encoder if positive is not None else None
    positive_port = positive.port if positive is not None else None
    if positive is not None and positive_port is None:
        m.warn(f"{where}: a zeroed positive conditioning became an empty prompt")
        positive_port = empty_prompt(m, positive, encoder, where)
    negative_port = negative.port if negative is not None else None
    if negative is not None and negative_port is None and cfg > 1.0:
        # With guidance, ComfyUI contrasts against zeros; an empty prompt is our nearest.
        m.warn(
            f"{where}: the zeroed negative (ConditioningZeroOut) became an empty "
            f"negative prompt, as cfg {cfg:g} uses guidance"
        )
        negative_port = empty_prompt(m, negative, encoder, where)
    # cfg 1 means no guidance: a zeroed negative is never used, so it is left off.
    port = m.add(
        f"c{node.id}",
        "sample",
        params,
        {
            "model": model.port if model is not None else None,
            "positive": positive_port,
            "negative": negative_port,
            "latent": latent.port if latent is not None else None,
        },
        where,
    )
    return Value(PortKind.LATENT, port, node.id)


def select(m: Mapper, node: ComfyNode, comfy_name: str, param: str, fallback: str) -> str:
    """The node's `param` for the workflow's `comfy_name`: the same name, or a 422."""
    spec = m.descriptors["sample"].param(param)
    default = spec.default if spec is not None and isinstance(spec.default, str) else fallback
    wanted = m.text(node, comfy_name, default)
    allowed = list(spec.options) if spec is not None else []
    return exact_name(param, wanted, allowed, describe(node))
