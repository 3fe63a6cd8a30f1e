"""ComfyUI's two KSamplerAdvanced stages over one schedule, read for a family's own node.

Two stages chain as one render switched at step k when the first samples from noise (add_noise
enable, start 0, end k, return_with_leftover_noise enable) and the second takes its latents on
another model (add_noise disable, the same steps, start k, end at the last step or past it),
one sampler and scheduler for both. A family reads the pair onto its node's switch (Wan 2.2
A14B's experts, SDXL's refiner) and checks what else it needs (prompts, models); a pair that
does not chain so is refused naming the node, in the family's words (`refused`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from inline_core.graph.sampler_names import draws_noise
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import Collapse
from inline_core.importer.values import describe
from inline_core.importer.widgets import CONTROL_AFTER_GENERATE, WIDGET_ORDER
from inline_core.importer.workflow import ComfyNode, Link

ADVANCED = "KSamplerAdvanced"
END = 10_000  # ComfyUI's end_at_step default: past any schedule's last step
# A stage's widgets: what decides its part of the schedule.
SCHEDULE = tuple(n for n in WIDGET_ORDER[ADVANCED] if n != CONTROL_AFTER_GENERATE)

# Why a stage does not chain: (the stage, why) -> the family's refusal.
Refused = Callable[[ComfyNode, str], UnsupportedNode]


@dataclass(frozen=True)
class Stages:
    first: ComfyNode
    last: ComfyNode
    steps: int
    switch: int  # step k: the last stage's first step


def read_stages(
    collapse: Collapse,
    first: ComfyNode,
    last: ComfyNode,
    refused: Refused,
    defaults: tuple[str, str] = ("euler", "normal"),
) -> Stages:
    """The two stages `first` -> `last` as one schedule switched at a step; `defaults`: the
    sampler_name and scheduler a stage without them samples with."""
    m = collapse.mapper

    def require(ok: bool, node: ComfyNode, why: str) -> None:
        if not ok:
            raise refused(node, why)

    for stage in (first, last):
        known(collapse, stage)
    steps = m.whole(first, "steps", 20)
    k = m.whole(first, "end_at_step", END)
    require(m.text(first, "add_noise", "enable") == "enable", first, "add_noise is 'disable'")
    require(m.whole(first, "start_at_step", 0) == 0, first, "it starts after step 0")
    require(
        m.text(first, "return_with_leftover_noise", "disable") == "enable",
        first,
        "return_with_leftover_noise is 'disable' (it denoises fully at its last step)",
    )
    require(m.text(last, "add_noise", "disable") == "disable", last, "add_noise is 'enable'")
    require(m.whole(last, "steps", steps) == steps, last, f"its steps are not {describe(first)}'s")
    require(
        1 <= k < steps,
        first,
        f"it ends at step {k}, not between 1 and {steps - 1} of its {steps} steps",
    )
    start = m.whole(last, "start_at_step", 0)
    require(start == k, last, f"it starts at step {start}, not where {describe(first)} ends ({k})")
    end = m.whole(last, "end_at_step", END)
    require(end >= steps, last, f"it ends at step {end}, before the schedule's {steps}")
    for name, default in zip(("sampler_name", "scheduler"), defaults, strict=True):
        ours, theirs = m.text(first, name, default), m.text(last, name, default)
        require(ours == theirs, last, f"its {name} {theirs!r} is not {describe(first)}'s {ours!r}")
    return Stages(first, last, steps, k)


def lone_steps(collapse: Collapse, sampler: ComfyNode, refused: Refused) -> int:
    """One KSamplerAdvanced read as a KSampler: its steps, when it runs the whole schedule from
    noise (refused otherwise)."""
    m = collapse.mapper
    known(collapse, sampler)
    steps = m.whole(sampler, "steps", 20)
    if not (
        m.text(sampler, "add_noise", "enable") == "enable"
        and m.whole(sampler, "start_at_step", 0) == 0
        and m.whole(sampler, "end_at_step", END) >= steps
    ):
        raise refused(
            sampler, "it runs part of its schedule, and no second stage takes its latents"
        )
    return steps


def known(collapse: Collapse, stage: ComfyNode) -> None:
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


def second_seed_note(collapse: Collapse, stages: Stages, default_sampler: str) -> None:
    """A second stage on a noise_seed of its own: ComfyUI draws that stage's step noise from it,
    the node every step's from the first stage's seed; listed as changing the picture where the
    sampler draws noise (an ancestral, SDE or LCM one), moot otherwise."""
    m = collapse.mapper
    first, last = stages.first, stages.last
    seed, seed_2 = m.whole(first, "noise_seed", 0), m.whole(last, "noise_seed", 0)
    sampler = m.text(first, "sampler_name", default_sampler)
    if seed_2 != seed and draws_noise(sampler):
        m.substituted(
            last,
            f"{sampler} draws fresh noise each step: ComfyUI draws {describe(last)}'s from its "
            f"noise_seed {seed_2}, the node from {describe(first)}'s {seed}",
        )
