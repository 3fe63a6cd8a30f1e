"""Params and ports every family's high-level node declares alike (torch-free)."""

from __future__ import annotations

from inline_core.graph.descriptor import ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind

MAX_PROMPT_CHARS = 20_000
# One edge per LoRA of the stack, from `input/lora` nodes, applied in edge order.
LORAS = PortSpec("loras", PortKind.LORA, optional=True, multiple=True, label="LoRAs")
NEGATIVE_PROMPT = ParamSpec(
    "negative_prompt", ParamWidget.TEXTAREA, default="", max_length=MAX_PROMPT_CHARS
)

# -1: a seed drawn at submit and kept with the run, so a re-run draws the same pixels.
SEED = ParamSpec("seed", ParamWidget.SEED, default=-1)
# The family's model file, a picker over `diffusion_models/` (empty: the one the family finds).
MODEL = ParamSpec(
    "model",
    ParamWidget.SELECT,
    default=None,
    options_from="diffusion_models",
    label="Diffusion model (empty: auto)",
)
# The stack's VAE and text encoder, pickers over their folders (empty: the ones the family finds
# for its model). A file named here is used or refused at submit (`StackResolver.picks_of`).
VAE = ParamSpec(
    "vae",
    ParamWidget.SELECT,
    default=None,
    options_from="vae",
    label="VAE (empty: auto)",
    empty_found_anywhere=True,
)
TEXT_ENCODER = ParamSpec(
    "text_encoder",
    ParamWidget.SELECT,
    default=None,
    options_from="text_encoders",
    label="Text encoder (empty: auto)",
    empty_found_anywhere=True,
)
