"""A model built from its config and given a file's weights strictly (torch): every key of both
matched, with its shape, so a file read wrong is an error naming the keys, never a blurred
render. LTX-2's single-file parts (the latent upsampler, LTX-2.5's diffusion video VAE) load so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
from torch import nn

from inline_core.diffusion.libs import assign_state, module
from inline_core.errors import RunFailed

SHOWN = 4  # keys named in an error


def built_strictly(
    cls: Any, config: Mapping[str, Any], state: Mapping[str, torch.Tensor], named: str
) -> nn.Module:
    """`cls` built empty from `config`, then given `state`; `RunFailed` when a key's shape,
    a missing key or an unexpected one says the file does not match (`named`: what and where,
    e.g. "the latent upsampler /models/x.safetensors")."""
    with module("accelerate").init_empty_weights(include_buffers=False):
        model = cast(nn.Module, cls.from_config(dict(config)))
    expected = model.state_dict()
    wrong = [k for k, v in state.items() if k in expected and v.shape != expected[k].shape]
    missing, unexpected = assign_state(model, {k: v for k, v in state.items() if k not in wrong})
    if wrong or missing or unexpected:
        raise RunFailed(
            f"{named} does not match its own config: shapes of {wrong[:SHOWN]}, "
            f"missing {missing[:SHOWN]}, unexpected {unexpected[:SHOWN]}"
        )
    return model
