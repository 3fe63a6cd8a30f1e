"""Params every family's high-level node declares alike (torch-free)."""

from __future__ import annotations

from inline_core.graph.descriptor import ParamSpec, ParamWidget

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
