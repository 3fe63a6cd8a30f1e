"""ComfyUI's two-stage sampling of Wan 2.2 A14B, read onto `alibaba/wan` (Wan's recipe reader).

The official Wan 2.2 14B templates (text-to-video and image-to-video) sample in two
KSamplerAdvanced stages over one schedule of N steps: the first on the high-noise expert's
UNETLoader (add_noise enable, steps N, start 0, end k, return_with_leftover_noise enable), the
second on the low-noise one's, taking the first's latents (add_noise disable, start k, end N or
past it). That is one render of the pair switched at step k: the node's `switch_step`, with
the first stage's noise_seed as `seed`, its cfg as `guidance` and the second's as `guidance_2`.
Each stage's ModelSamplingSD3 shift and LoraLoaderModelOnly chain is read off its own model's
way; the LoRAs become `input/lora` nodes for their expert (`high`, `low`), and the node samples
one schedule, so two different shifts are a warning naming the one used (the first stage's).
Stages that do not chain so (other steps, another start or end, other add_noise or leftover
noise settings, other samplers, schedulers or prompts, one model for both) are refused naming
the node. A lone KSamplerAdvanced that runs the whole schedule with its noise reads as a KSampler.
"""

from __future__ import annotations

from inline_core.graph.sampler_names import MULTISTEP_SAMPLERS
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import Collapse, Sampling
from inline_core.importer.stages import ADVANCED, lone_steps, read_stages, second_seed_note
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode

__all__ = ["ADVANCED", "history_note", "read", "shifts_note"]


def read(collapse: Collapse, sampler: ComfyNode) -> Sampling:
    """The sampling of the chain whose last sampler is `sampler`, a KSamplerAdvanced: two
    stages, or one that runs the whole schedule."""
    m = collapse.mapper
    upstream = collapse.required(sampler, "latent_image")
    if upstream.class_type != ADVANCED:
        steps = lone_steps(collapse, sampler, _refused)
        return Sampling(
            sampler, None, m.whole(sampler, "noise_seed", 0), steps, m.number(sampler, "cfg", 5.0)
        )
    stages = read_stages(collapse, upstream, sampler, _refused, ("uni_pc", "simple"))
    first, last = stages.first, stages.last
    for name in ("positive", "negative"):
        if first.inputs.get(name) != last.inputs.get(name):
            raise _refused(
                last,
                f"its {name} prompt is not {describe(first)}'s (the node takes one pair of "
                "prompts)",
            )
    second_seed_note(collapse, stages, "uni_pc")
    return Sampling(
        first,
        last,
        m.whole(first, "noise_seed", 0),
        stages.steps,
        m.number(first, "cfg", 5.0),
        {"guidance_2": m.number(last, "cfg", 5.0), "switch_step": stages.switch},
    )


def _refused(node: ComfyNode, why: str) -> UnsupportedNode:
    return UnsupportedNode(
        f"{describe(node)}: {why}. Two KSamplerAdvanced stages import as Wan 2.2 A14B's "
        "pair switched at a step, as the official 14B templates chain them: the first on "
        "the high-noise model (add_noise enable, start 0, end k, "
        "return_with_leftover_noise enable), the second on the low-noise model with the "
        "first's latents (add_noise disable, start k, end at the last step), one sampler, "
        "scheduler and prompt pair"
    )


def shifts_note(
    collapse: Collapse, low_stage: ComfyNode, high: float | None, low: float | None
) -> None:
    """Two stages' shifts: the node samples one schedule, at the first stage's (the low-noise
    stage's shift is listed as changing the picture)."""
    if high == low:
        return
    shown = ["the model's own" if s is None else f"{s:g}" for s in (high, low)]
    collapse.mapper.substituted(
        low_stage,
        f"the two stages' ModelSamplingSD3 shifts differ ({shown[0]} on the high-noise stage, "
        f"{shown[1]} on the low-noise one); alibaba/wan samples one schedule, at the high-noise "
        f"stage's shift ({shown[0]})",
    )


def history_note(collapse: Collapse, sampling: Sampling) -> None:
    """Two stages on a multistep sampler: ComfyUI starts the second stage's sampler afresh, the
    node walks on with the history of its earlier steps (as diffusers' WanPipeline switches its
    experts under one scheduler); listed as changing the picture."""
    if sampling.last is None:
        return
    sampler = collapse.mapper.text(sampling.first, "sampler_name", "uni_pc")
    if sampler in MULTISTEP_SAMPLERS:
        collapse.mapper.substituted(
            sampling.last,
            f"{sampler} steps from its earlier steps: ComfyUI starts it afresh at "
            f"{describe(sampling.last)}, alibaba/wan walks on across the switch with its history "
            "(as diffusers' WanPipeline switches experts under one scheduler)",
        )
