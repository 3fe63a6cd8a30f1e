"""Z-Image's LoRA namings: which trainers' files it takes and which of its layers they may adapt
(torch-free; the weights are converted by diffusers' own Z-Image converter when they load).

- diffusers/PEFT: `transformer.layers.0.attention.to_q.lora_A.weight`;
- ai-toolkit and ComfyUI: `diffusion_model.layers.0.attention.to_q.lora_A.weight` (or
  `lora_down` / `lora_up` with an `alpha`, and `attention.out` for `to_out.0`);
- kohya: `lora_unet_layers_0_attention_to_q.lora_down.weight` with an `alpha`.

The layers are those whose input has one row per request in a batched forward (attention,
feed-forward, modulation, final layer, timestep MLP), so each row gets its own stack. The patch
and caption embedders see every request's tokens in one flat tensor and are not adapted.
"""

from __future__ import annotations

import re

from inline_core.diffusion.adapters.naming import LoraNamings, Naming

_BLOCK = r"(?:layers|noise_refiner|context_refiner)\.\d+"
TARGET = re.compile(
    rf"^(?:{_BLOCK}\.attention\.(?:to_q|to_k|to_v|to_out\.0)"
    rf"|{_BLOCK}\.feed_forward\.(?:w1|w2|w3)"
    rf"|{_BLOCK}\.adaLN_modulation\.0"
    r"|all_final_layer\.\d+-\d+\.(?:linear|adaLN_modulation\.1)"
    r"|t_embedder\.mlp\.[02])$"
)
# kohya joins a module path with underscores; these names keep theirs.
_UNDERSCORED = (
    "to_q",
    "to_k",
    "to_v",
    "to_out",
    "feed_forward",
    "adaLN_modulation",
    "noise_refiner",
    "context_refiner",
    "all_final_layer",
    "t_embedder",
)


def _module(layer: str) -> str | None:
    # ComfyUI's original naming calls the attention output `out`.
    name = re.sub(r"\.attention\.out$", ".attention.to_out.0", layer)
    return name if TARGET.match(name) else None


def _kohya_module(layer: str) -> str | None:
    dotted = layer.replace("_", ".")
    for name in _UNDERSCORED:
        dotted = dotted.replace(name.replace("_", "."), name)
    return _module(dotted)


ZIMAGE_LORAS = LoraNamings(
    "Z-Image",
    (
        Naming("diffusers/PEFT", "transformer.", _module),
        Naming("ai-toolkit/ComfyUI", "diffusion_model.", _module),
        Naming("kohya", "lora_unet_", _kohya_module),
    ),
)
