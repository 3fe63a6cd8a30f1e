"""The sampling params of a family node whose model has its own defaults (torch-free): what the
descriptor declares (steps and guidance empty: the model's own), and how `lower` fills them in
from the variant the files tell."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.contract.common_params import MODEL, SEED, TEXT_ENCODER, VAE
from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import ParamSpec, ParamWidget
from inline_core.graph.primitives import SHIFT_PARAMS
from inline_core.graph.sampler_names import (
    CFG_PP_SAMPLERS,
    GUIDED_SAMPLERS,
    SCHEDULES,
)

# The params a request takes as they are (the schedule's name becomes `sigma_schedule`).
SAMPLING = ("width", "height", "steps", "guidance", "seed", "sampler")


def size_param(name: str) -> ParamSpec:
    return ParamSpec(
        name, ParamWidget.NUMBER, default=1024, minimum=64, maximum=4096, step=16, integer=True
    )


def sampler_param(own: str | None = None, default: str = "euler") -> ParamSpec:
    """ComfyUI's samplers, CFG++ included (a family whose step hands on no unconditional
    prediction refuses those at submit); `own`: what an empty choice means, the default (None:
    no empty choice, `default` by default)."""
    if own is None:
        return ParamSpec("sampler", ParamWidget.SELECT, default, options=GUIDED_SAMPLERS)
    label = f"Sampler (empty: {own})"
    return ParamSpec("sampler", ParamWidget.SELECT, "", options=("", *GUIDED_SAMPLERS), label=label)


def schedule_param(own: str | None = None, default: str = "simple") -> ParamSpec:
    """ComfyUI's schedules; `own` and `default` as `sampler_param`'s (a family whose checkpoints
    are sampled on another schedule, SDXL's `normal`, names it as `default`)."""
    if own is None:
        return ParamSpec("schedule", ParamWidget.SELECT, default, options=SCHEDULES)
    label = f"Schedule (empty: {own})"
    return ParamSpec("schedule", ParamWidget.SELECT, "", options=("", *SCHEDULES), label=label)


def sampling_params(model_default: str, guidance_note: str) -> tuple[ParamSpec, ...]:
    """Size, steps, guidance, sampler, schedule, shift, seed and the stack's pickers;
    `model_default` says what an empty steps or guidance means, `guidance_note` what guidance
    does."""
    return (
        size_param("width"),
        size_param("height"),
        ParamSpec(
            "steps",
            ParamWidget.NUMBER,
            default=None,
            minimum=1,
            maximum=100,
            integer=True,
            label=f"Steps ({model_default})",
        ),
        ParamSpec(
            "guidance",
            ParamWidget.NUMBER,
            default=None,
            minimum=0.0,
            maximum=20.0,
            step=0.1,
            label=f"Guidance ({model_default}; {guidance_note})",
        ),
        # CFG++ too: the shared flow pipeline hands on the unconditional prediction (a model
        # that runs no guidance refuses them in its family's check).
        sampler_param(),
        schedule_param(),
        *SHIFT_PARAMS,  # the shared flow pipeline runs the request's own shift
        SEED,
        MODEL,
        VAE,
        TEXT_ENCODER,
    )


def sampling_request(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The node's sampling params as a request takes them: the model's `defaults` where a param
    is empty, typed."""
    request: dict[str, Any] = {name: params.get(name) for name in SAMPLING}
    for name, value in defaults.items():
        if request[name] is None:
            request[name] = value
    for name in ("width", "height", "steps", "seed"):
        request[name] = int(request[name])
    request["guidance"] = float(request["guidance"])
    request["sampler"] = str(request["sampler"] or "euler")
    request["sigma_schedule"] = str(params.get("schedule") or "simple")
    for name in ("shift", "mu"):  # set only where the request replaces the model's own
        if params.get(name) is not None:
            request[name] = float(params[name])
    return request


def guidance_param(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> float:
    """The node's guidance, or the model's own where it is empty."""
    value = params.get("guidance")
    return float(defaults["guidance"] if value is None else value)


def refuse_cfg_pp(
    sampler: object, guides: bool | str, model: str, node_id: str, guided_from: str
) -> None:
    """A CFG++ sampler where no unconditional prediction is made, as a 422: `guides` a text, the
    model runs no guidance of that kind at all (why: "step-distilled"); False, the node's
    guidance leaves it off (`guided_from`: the guidance that turns it on, as the node counts it)."""
    if sampler not in CFG_PP_SAMPLERS:
        return
    name = str(sampler)
    plain = name.removesuffix("_cfg_pp")
    if isinstance(guides, str):
        raise InvalidRequest(
            f"{model} is {guides} and runs no classifier-free guidance, so it cannot run the "
            f"CFG++ sampler {name!r}: pick {plain!r}, or a base model",
            node_id=node_id,
        )
    if not guides:
        raise InvalidRequest(
            f"{model}: the CFG++ sampler {name!r} steps along the unconditional prediction, "
            f"which only a guided render computes: set guidance {guided_from}, or pick {plain!r}",
            node_id=node_id,
        )
