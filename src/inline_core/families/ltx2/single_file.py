"""One part of ComfyUI's all-in-one LTX-2 file, loaded into its diffusers class: built from the
config its header holds (`single_file_config.py`), its tensors read under diffusers' names
(`checkpoint_keys.py`) and loaded strictly, so a layout read wrong is an error naming the file
and the keys, never a render of noise."""

from __future__ import annotations

import importlib
from typing import Any, cast

import torch
from torch import nn

from inline_core.device.policy import Placement
from inline_core.diffusion.libs import assign_state, module, quiet
from inline_core.diffusion.loading import guarded, place
from inline_core.errors import RunFailed
from inline_core.families.ltx2.quantized_part import dequantized_part
from inline_core.families.ltx2.single_file_config import SingleFileError, layout
from inline_core.models.source import Source

SHOWN = 4  # keys named in an error


def load_part(
    part: str, library: str, class_name: str, what: str, source: Source, placement: Placement
) -> nn.Module:
    """The part `part` of the file behind `source` (a view of it), in `placement`."""

    def load() -> nn.Module:
        quiet()
        try:
            found = layout(source.path)
        except SingleFileError as exc:
            raise RunFailed(f"the LTX-2 file {source.path} cannot be read: {exc}") from exc
        config = dict(found.configs[part])
        # The vocoder's class is its config's (LTX-2.3's has its bandwidth extension).
        cls: Any = getattr(module(library), str(config.pop("_class_name", class_name)))
        with module("accelerate").init_empty_weights(include_buffers=False):
            model = cast(nn.Module, cls.from_config(config))
        names = found.names[part]
        st = cast(Any, importlib.import_module("safetensors"))
        with st.safe_open(str(source.path), framework="pt", device="cpu") as f:
            raw = {key: cast(torch.Tensor, f.get_tensor(key)) for key in names}
        state = dequantized_part(raw, names, source.path, placement)  # ComfyUI's quantized layers
        expected = model.state_dict()
        wrong = [k for k, v in state.items() if k in expected and v.shape != expected[k].shape]
        if wrong:
            raise RunFailed(
                f"the LTX-2 {what} in {source.path} does not match its own config: "
                + ", ".join(
                    f"{k} {tuple(state[k].shape)} (config: {tuple(expected[k].shape)})"
                    for k in wrong[:SHOWN]
                )
            )
        missing, unexpected = assign_state(model, state)
        if missing or unexpected:
            raise RunFailed(
                f"the LTX-2 {what} in {source.path} does not match its own config: "
                f"missing {missing[:SHOWN]}, unexpected {unexpected[:SHOWN]}"
            )
        return place(model, placement)

    return guarded(what, source, load)
