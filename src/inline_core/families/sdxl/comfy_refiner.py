"""ComfyUI's SDXL base + refiner template (`sdxl_simple_example.json`) read onto
`stability/sdxl`'s `refiner` and `refiner_switch`.

The template samples in two KSamplerAdvanced stages over one schedule of N steps
(`importer/stages.py`): the base checkpoint's to step k, the refiner checkpoint's from k, each
with its own CLIPTextEncode prompts (the same texts) on its own checkpoint's CLIP, decoded with
the refiner's VAE. That is the node with the refiner picked and `refiner_switch = k / N`: on the
"normal" schedule (the template's, even in timesteps) diffusers' cutoff at that share falls at
step k; on another it falls where the timesteps cross it, which is listed as changing the
picture, as is an ancestral or SDE sampler's refiner stage on a noise_seed of its own (the node
draws every step's noise from its one seed). Stages the node cannot render as one (other
prompts or cfg, LoRAs or another CLIP layer on the refiner's way, a refiner that is the base's
own checkpoint) are refused naming the node.
"""

from __future__ import annotations

from typing import Any

from inline_core.families.sdxl.comfy import CHECKPOINT_LOADER
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.own_node import LORA_LOADERS, Collapse, Sampling
from inline_core.importer.stages import ADVANCED, lone_steps, read_stages, second_seed_note
from inline_core.importer.values import describe
from inline_core.importer.workflow import ComfyNode, Link

EVEN_SCHEDULE = "normal"  # a schedule on which the share k / N is step k


def staged_sampling(collapse: Collapse, sampler: ComfyNode) -> Sampling:
    """A KSamplerAdvanced chain ending at `sampler`: the base + refiner pair, or one stage that
    runs the whole schedule (read as a KSampler)."""
    m = collapse.mapper
    upstream = collapse.required(sampler, "latent_image")
    if upstream.class_type != ADVANCED:
        steps = lone_steps(collapse, sampler, _refused)
        seed, cfg = m.whole(sampler, "noise_seed", 0), m.number(sampler, "cfg", 8.0)
        return Sampling(sampler, None, seed, steps, cfg)
    stages = read_stages(collapse, upstream, sampler, _refused)
    first, last = stages.first, stages.last
    cfg, cfg_2 = m.number(first, "cfg", 8.0), m.number(last, "cfg", 8.0)
    if cfg != cfg_2:
        why = f"its cfg {cfg_2:g} is not {describe(first)}'s {cfg:g} (one cfg guides both)"
        raise _refused(last, why)
    switch = stages.switch / stages.steps
    schedule = m.text(first, "scheduler", EVEN_SCHEDULE)
    if schedule != EVEN_SCHEDULE:
        m.substituted(
            last,
            f"the refiner takes over at refiner_switch {switch:g} as diffusers' denoising_end "
            f"places it (below timestep {round(1000 - switch * 1000)}), which on the "
            f"{schedule!r} schedule need not be step {stages.switch}",
        )
    second_seed_note(collapse, stages, "euler")
    seed = m.whole(first, "noise_seed", 0)
    return Sampling(first, last, seed, stages.steps, cfg, {"refiner_switch": switch})


def refiner_loader(collapse: Collapse, last: ComfyNode, prompts: tuple[str, str]) -> ComfyNode:
    """The refiner stage's checkpoint, its prompts read (they must be `prompts`, the base's)."""
    node = collapse.required(last, "model")
    if node.class_type in LORA_LOADERS:
        why = f"{describe(node)} adapts the refiner; the node's LoRAs adapt the base alone"
        raise _refused(last, why)
    collapse.expect(node, CHECKPOINT_LOADER)
    for name, base in zip(("positive", "negative"), prompts, strict=True):
        text = collapse.prompt(last, name)
        if text != base:
            why = f"its {name} prompt {text[:60]!r} is not the base stage's {base[:60]!r}"
            raise _refused(last, why + " (the node takes one pair of prompts)")
    return node


def decoder_note(collapse: Collapse, last: ComfyNode, refiner: ComfyNode) -> None:
    """The node decodes with the refiner's VAE: a decode with the base checkpoint's is listed."""
    m = collapse.mapper
    for node in collapse.nodes.values():
        samples, vae = node.inputs.get("samples"), node.inputs.get("vae")
        if not (isinstance(samples, Link) and samples.node == last.id and isinstance(vae, Link)):
            continue
        source = collapse.nodes.get(vae.node)
        if source is None or source.class_type != CHECKPOINT_LOADER:
            continue  # a VAELoader's file: the node's `vae`
        if m.text(source, "ckpt_name") != m.text(refiner, "ckpt_name"):
            m.substituted(
                node,
                f"it decodes with {describe(source)}'s VAE; with a refiner the node decodes "
                "with the refiner checkpoint's",
            )


def refiner_params(collapse: Collapse, refiner: ComfyNode, node_id: str) -> dict[str, Any]:
    m = collapse.mapper
    name = m.text(refiner, "ckpt_name")
    return {"refiner": m.model_file(node_id, "checkpoints", name, describe(refiner))}


def _refused(node: ComfyNode, why: str) -> UnsupportedNode:
    return UnsupportedNode(
        f"{describe(node)}: {why}. Two KSamplerAdvanced stages import onto stability/sdxl as "
        "the base + refiner template chains them: the base checkpoint's stage first (add_noise "
        "enable, start 0, end k, return_with_leftover_noise enable), then the refiner "
        "checkpoint's with its latents (add_noise disable, start k, end at the last step), one "
        "sampler, scheduler, cfg and prompt pair"
    )
