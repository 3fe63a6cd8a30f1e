"""Wan 2.2 A14B's two experts: how the pair is found from the file a user picks (torch-free; runs
at submit).

An A14B expert has the Wan 2.1 14B transformer's shapes, so no header tells it from one: the pair
is what marks it. ComfyUI ships the pair as two files whose names differ only in `high_noise` and
`low_noise` (`wan2.2_t2v_high_noise_14B_fp16.safetensors`, `wan2.2_t2v_low_noise_14B_fp16...`);
picking either renders the pair, its sibling found beside it (a missing sibling is named, with
where it goes). A diffusers folder holds both (`transformer/`, `transformer_2/`) and its
`boundary_ratio` in `model_index.json`. The high-noise expert is the stack's `transformer`, the
low-noise one its `transformer_2`: diffusers' `WanPipeline` names them so. The pair switches where
the model's boundary ratio falls in a request's schedule, or at the request's `switch_step` (the
step ComfyUI's two KSamplerAdvanced stages split at); each expert takes its own LoRA stack (an
`input/lora`'s `expert`: both, high or low).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from inline_core.contract.files import TRANSFORMER, read_json
from inline_core.contract.sources import Missing, Sources
from inline_core.families.wan.transformer import config_of
from inline_core.models.source import Source

LOW_NOISE = "transformer_2"  # the low-noise expert's part (diffusers' name and subfolder)
_EXPERT = re.compile(r"(high|low)([_-]?)noise", re.IGNORECASE)
_OTHER = {"high": "low", "low": "high"}


def expert_of(name: str) -> str | None:
    """ "high" or "low" for a file named as one of a pair's experts; None otherwise."""
    match = _EXPERT.search(name)
    return None if match is None else match.group(1).lower()


def sibling_name(name: str) -> str | None:
    """The other expert's file name: `high_noise` <-> `low_noise`, in the name's own case."""
    match = _EXPERT.search(name)
    if match is None:
        return None
    word = match.group(1)
    other = _OTHER[word.lower()]
    other = other.upper() if word.isupper() else other.capitalize() if word[0].isupper() else other
    return name[: match.start(1)] + other + name[match.end(1) :]


def with_experts(
    parts: Mapping[str, Source | None], missing: list[Missing]
) -> dict[str, Source | None]:
    """The stack's parts with the low-noise expert beside the high-noise one when the picked
    model is one of a pair (`missing` gets what is not there); unchanged otherwise."""
    transformer = parts.get(TRANSFORMER)
    if transformer is None:
        return dict(parts)
    if transformer.subfolder == TRANSFORMER:  # a diffusers pipeline folder
        folder = transformer.path / LOW_NOISE
        if not (folder / "config.json").is_file():
            return dict(parts)
        return _placed(parts, transformer, Source(transformer.path, LOW_NOISE))
    if not transformer.is_file:
        return dict(parts)
    picked = transformer.path
    role, other = expert_of(picked.name), sibling_name(picked.name)
    if role is None or other is None:
        return dict(parts)
    sibling = picked.parent / other
    label = f"{_OTHER[role]}-noise expert"
    if not sibling.is_file():
        missing.append(
            Missing(
                label,
                f"{picked.name} is one of Wan 2.2 A14B's two experts; put its {label} "
                f"{other} beside it in {picked.parent}",
            )
        )
        return {**parts, TRANSFORMER: None}
    if config_of(Source(sibling)) != config_of(transformer):
        missing.append(
            Missing(
                label,
                f"{other} (in {picked.parent}) is not the same kind of model as {picked.name}: "
                "a pair's experts have the same shapes",
            )
        )
        return {**parts, TRANSFORMER: None}
    high, low = (transformer, Source(sibling)) if role == "high" else (Source(sibling), transformer)
    return _placed(parts, high, low)


def _placed(
    parts: Mapping[str, Source | None], high: Source, low: Source
) -> dict[str, Source | None]:
    """The parts in order, the low-noise expert right after the high-noise one."""
    out: dict[str, Source | None] = {TRANSFORMER: high, LOW_NOISE: low}
    out.update((name, source) for name, source in parts.items() if name != TRANSFORMER)
    return out


def is_pair(sources: Sources) -> bool:
    return sources.get(LOW_NOISE) is not None


def boundary_ratio(sources: Sources, default: float) -> float | None:
    """Where the pair switches, as a share of the training timesteps: a diffusers folder's own
    `boundary_ratio`, else the variant's published one; None for a model of one expert."""
    low = sources.get(LOW_NOISE)
    if low is None:
        return None
    if low.subfolder == LOW_NOISE:
        index = read_json(Path(low.path) / "model_index.json") or {}
        value = index.get("boundary_ratio")
        if isinstance(value, int | float):
            return float(value)
    return default
