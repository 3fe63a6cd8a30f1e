"""A SamplerCustomAdvanced chain read as the KSampler it amounts to, for a family's own node.

ComfyUI's newer templates (FLUX.2 klein's) sample with SamplerCustomAdvanced: RandomNoise (the
seed), a guider (CFGGuider: the model, two prompts and cfg; BasicGuider: the model and one
prompt, unguided), KSamplerSelect (the sampler), a sigmas node (the steps and the schedule) and
the latent. `CustomCollapse` reads that chain into one stand-in KSampler over the same links, so
the rest of `Collapse` (prompts, the model's way, the latent, the notes on what renders
otherwise) reads it as it reads a KSampler. `BasicScheduler`'s sigmas are read here; a family's
own sigmas node (FLUX.2's `Flux2Scheduler`) is its reader's `schedule`. Anything else on the
chain (DisableNoise, another guider or sigmas node) is refused naming it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from inline_core.graph.sampler_names import SAMPLERS, SCHEDULES
from inline_core.importer.own_node import Collapse, Sampling
from inline_core.importer.samplers import exact_name
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode, Link

ADVANCED = "SamplerCustomAdvanced"
GUIDERS = ("CFGGuider", "BasicGuider")
BASIC_SCHEDULER = "BasicScheduler"


class CustomCollapse(Collapse):
    SAMPLERS: ClassVar[tuple[str, ...]] = ("KSampler", ADVANCED)
    # The sigmas nodes `schedule` reads (a family's reader adds its own).
    SCHEDULERS: ClassVar[tuple[str, ...]] = (BASIC_SCHEDULER,)

    def sampling(self, sampler: ComfyNode) -> Sampling:
        if sampler.class_type != ADVANCED:
            return super().sampling(sampler)
        return super().sampling(self.as_ksampler(sampler))

    def as_ksampler(self, sampler: ComfyNode) -> ComfyNode:
        """The KSampler `sampler`'s chain amounts to: its widgets the chain's raw values (a link
        to a constant node stays a link, followed as a KSampler's would be), its model and
        prompts the guider's links, its latent the sampler's."""
        noise = self.required(sampler, "noise")
        self.expect(noise, "RandomNoise")
        guider = self.required(sampler, "guider")
        self.expect(guider, *GUIDERS)
        select = self.required(sampler, "sampler")
        self.expect(select, "KSamplerSelect")
        sigmas = self.required(sampler, "sigmas")
        self.expect(sigmas, *self.SCHEDULERS)
        inputs: dict[str, Any] = {
            "seed": noise.inputs.get("noise_seed"),
            "cfg": guider.inputs.get("cfg") if guider.class_type == "CFGGuider" else 1.0,
            "sampler_name": select.inputs.get("sampler_name"),
            **self.schedule(sigmas, sampler),
            "model": guider.inputs.get("model"),
            "latent_image": sampler.inputs.get("latent_image"),
        }
        if guider.class_type == "CFGGuider":
            inputs["positive"] = guider.inputs.get("positive")
            inputs["negative"] = guider.inputs.get("negative")
        else:  # BasicGuider: one prompt, no negative (unguided)
            inputs["positive"] = guider.inputs.get("conditioning")
        return ComfyNode(sampler.id, sampler.class_type, inputs, sampler.title)

    def schedule(self, sigmas: ComfyNode, sampler: ComfyNode) -> dict[str, Any]:
        """The sigmas node as a KSampler's `steps`, `scheduler` and `denoise` (raw values)."""
        self.source(sigmas, "model", optional=True)  # the guider's model, read on its way
        return {
            "steps": sigmas.inputs.get("steps"),
            "scheduler": sigmas.inputs.get("scheduler"),
            "denoise": sigmas.inputs.get("denoise"),
        }

    def prompt(self, sampler: ComfyNode, name: str) -> str:
        """As the base reads it; BasicGuider's missing negative is the empty prompt (unused:
        it samples unguided)."""
        if sampler.class_type == ADVANCED and name not in sampler.inputs:
            return ""
        return super().prompt(sampler, name)

    # -- what a family's reader of such chains shares ---------------------------------------

    def node_names(self, sampler: ComfyNode, found: Sampling) -> Sampling:
        """The chain's sampler and scheduler as the node's own `sampler` and `schedule` (a name
        the node does not offer is refused, naming the closest)."""
        m, first, where = self.mapper, found.first, describe(sampler)
        wanted = m.text(first, "sampler_name", "euler")
        offered = self.recipe.samplers or SAMPLERS  # the node's own (CFG++ where it runs it)
        found.extra["sampler"] = exact_name("sampler", wanted, offered, where)
        schedule = m.text(first, "scheduler", "simple")
        found.extra["schedule"] = exact_name("scheduler", schedule, SCHEDULES, where)
        return found

    def denoise_note(self, sampler: ComfyNode) -> None:
        denoise = self.mapper.number(sampler, "denoise", 1.0)
        if denoise < 1.0:
            self.mapper.substituted(
                sampler, f"denoise {denoise:g} is not offered; the whole schedule runs"
            )

    def zeroed_negative_note(self, sampler: ComfyNode, through: tuple[str, ...] = ()) -> None:
        """A zeroed negative (ConditioningZeroOut) under guidance, said: the node guides against
        the empty prompt's encoding (unguided, the negative is not read). `through`: classes
        the negative's conditioning passes through on its way."""
        if self.mapper.number(sampler, "cfg", 1.0) <= 1.0:
            return
        raw = sampler.inputs.get("negative")
        node = self.nodes.get(raw.node) if isinstance(raw, Link) else None
        while node is not None and node.class_type in through:
            raw = node.inputs.get("conditioning")
            node = self.nodes.get(raw.node) if isinstance(raw, Link) else None
        if node is not None and node.class_type == "ConditioningZeroOut":
            self.mapper.substituted(
                node, "guided against the empty prompt's encoding, not a zeroed conditioning"
            )
