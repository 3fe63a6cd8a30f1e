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

from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import Collapse, Sampling
from inline_core.importer.values import describe
from inline_core.importer.widgets import CONTROL_AFTER_GENERATE, WIDGET_ORDER
from inline_core.importer.workflow import ComfyNode, Link

ADVANCED = "KSamplerAdvanced"
END = 10_000  # ComfyUI's end_at_step default: past any schedule's last step
# A stage's widgets: what decides its part of the schedule.
SCHEDULE = tuple(n for n in WIDGET_ORDER[ADVANCED] if n != CONTROL_AFTER_GENERATE)


def read(collapse: Collapse, sampler: ComfyNode) -> Sampling:
    """The sampling of the chain whose last sampler is `sampler`, a KSamplerAdvanced: two
    stages, or one that runs the whole schedule."""
    m = collapse.mapper
    upstream = collapse.required(sampler, "latent_image")
    if upstream.class_type != ADVANCED:
        return _lone(collapse, sampler)
    first, last = upstream, sampler
    for stage in (first, last):
        _known(collapse, stage)
    steps = m.whole(first, "steps", 20)
    k = m.whole(first, "end_at_step", END)
    _require(m.text(first, "add_noise", "enable") == "enable", first, "add_noise is 'disable'")
    _require(m.whole(first, "start_at_step", 0) == 0, first, "it starts after step 0")
    _require(
        m.text(first, "return_with_leftover_noise", "disable") == "enable",
        first,
        "return_with_leftover_noise is 'disable' (it denoises fully at its last step)",
    )
    _require(m.text(last, "add_noise", "disable") == "disable", last, "add_noise is 'enable'")
    _require(m.whole(last, "steps", steps) == steps, last, f"its steps are not {describe(first)}'s")
    _require(
        1 <= k < steps,
        first,
        f"it ends at step {k}, not between 1 and {steps - 1} of its {steps} steps",
    )
    start = m.whole(last, "start_at_step", 0)
    _require(start == k, last, f"it starts at step {start}, not where {describe(first)} ends ({k})")
    end = m.whole(last, "end_at_step", END)
    _require(end >= steps, last, f"it ends at step {end}, before the schedule's {steps}")
    for name, default in (("sampler_name", "uni_pc"), ("scheduler", "simple")):
        ours, theirs = m.text(first, name, default), m.text(last, name, default)
        _require(ours == theirs, last, f"its {name} {theirs!r} is not {describe(first)}'s {ours!r}")
    for name in ("positive", "negative"):
        _require(
            first.inputs.get(name) == last.inputs.get(name),
            last,
            f"its {name} prompt is not {describe(first)}'s (the node takes one pair of prompts)",
        )
    return Sampling(
        first,
        last,
        m.whole(first, "noise_seed", 0),
        steps,
        m.number(first, "cfg", 5.0),
        {"guidance_2": m.number(last, "cfg", 5.0), "switch_step": k},
    )


def _lone(collapse: Collapse, sampler: ComfyNode) -> Sampling:
    """One KSamplerAdvanced: read as a KSampler when it runs the whole schedule from noise."""
    m = collapse.mapper
    _known(collapse, sampler)
    steps = m.whole(sampler, "steps", 20)
    _require(
        m.text(sampler, "add_noise", "enable") == "enable"
        and m.whole(sampler, "start_at_step", 0) == 0
        and m.whole(sampler, "end_at_step", END) >= steps,
        sampler,
        "it runs part of its schedule, and no second stage takes its latents",
    )
    return Sampling(
        sampler, None, m.whole(sampler, "noise_seed", 0), steps, m.number(sampler, "cfg", 5.0)
    )


def _known(collapse: Collapse, stage: ComfyNode) -> None:
    """Refuse a stage whose schedule settings come from a node only running the workflow
    decides (a switch, a math expression): what the stages chain to cannot be read."""
    m = collapse.mapper
    for name in SCHEDULE:
        value = stage.inputs.get(name)
        if isinstance(value, Link) and m.literal(stage, name) is None:
            source = m.workflow.nodes.get(value.node)
            shown = f"node {value.node}" if source is None else describe(source)
            raise UnsupportedNode(
                f"{describe(stage)}: its {name} comes from {shown}, whose value is known only "
                "when ComfyUI runs the workflow; the stages' steps, cfg and switch must be "
                "values (or primitive nodes) to import as one render"
            )


def _require(ok: bool, node: ComfyNode, why: str) -> None:
    if not ok:
        raise UnsupportedNode(
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
