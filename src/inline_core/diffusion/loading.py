"""Loading components from local files (never the network), as the device policy places them.

One loader for every `ModelFormat`: a single file (or a checkpoint's view of one part, read as if
it were that part's file) is recognised from its header, configured from its shapes, its NVFP4
and int8 layers dequantized in the compute dtype (`comfy_layers.py`), renamed to the library's
keys and read straight onto the component's device into a model built on the meta device (no
random initialisation, no copy through CPU memory when the component lives on a GPU); a folder
loads with the library's own `from_pretrained`, local files only. A file or folder that is
present but unreadable, truncated, or of the wrong architecture raises `RunFailed` naming it; one
that vanished since submit raises `ModelMissing`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import torch
from torch import nn

from inline_core.diffusion.comfy_layers import dequantize_comfy_layers
from inline_core.diffusion.comfy_quant import with_file_markers
from inline_core.diffusion.files.header import read_view
from inline_core.diffusion.files.shapes import ConfigInferenceError, weight_shapes
from inline_core.diffusion.formats.format import ModelFormat
from inline_core.diffusion.fp8_scales import (
    FP8,
    Converted,
    convert_scaled,
    dequantize,
    split_scales,
)
from inline_core.diffusion.layer_cast import compute_in, named_layers
from inline_core.diffusion.libs import (
    assign_state,
    load_safetensors,
    load_safetensors_view,
    module,
    quiet,
)
from inline_core.diffusion.placement import PlacementLike, home_device, quantize, torch_dtype
from inline_core.errors import InlineError, ModelMissing, RunFailed
from inline_core.models.source import Source

T = TypeVar("T")


def guarded(what: str, source: Source, load: Callable[[], T]) -> T:
    """Run `load`, turning any failure into an error that names the file."""
    where = source.location
    if not where.exists():
        raise ModelMissing(f"the {what} {where} is gone (it was there at submit)")
    try:
        return load()
    except InlineError:
        raise
    except ConfigInferenceError as exc:
        raise RunFailed(f"the {what} {where} has an unexpected layout: {exc}") from exc
    except Exception as exc:
        raise RunFailed(f"cannot load the {what} from {where}: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def place(
    model: nn.Module,
    placement: PlacementLike,
    scales: Mapping[str, torch.Tensor] | None = None,
    fmt: ModelFormat | None = None,
) -> nn.Module:
    """Move to where the module lives between uses, in its dtype, then quantize if asked. Weights
    kept in another dtype (`placement.storage`) stay as loaded and are cast as each layer runs
    (`scales`: a scaled fp8 file's, by linear layer), but for the modules `fmt` computes at load."""
    kept = placement.storage
    if kept is not None and kept != placement.dtype:
        model = model.to(device=home_device(placement))
        dtype = torch_dtype(placement.dtype)
        if fmt is not None:
            for name, layer in named_layers(model):
                if name and fmt.computes_at_load(name):
                    layer.to(dtype)
        return compute_in(model.eval(), dtype, scales)
    model = model.to(device=home_device(placement), dtype=torch_dtype(placement.dtype))
    return quantize(model.eval(), placement)


def load_dtype(placement: PlacementLike) -> torch.dtype:
    """The dtype weights are read in: the one they are kept in."""
    return torch_dtype(placement.storage or placement.dtype)


def load_component(fmt: ModelFormat, source: Source, placement: PlacementLike) -> nn.Module:
    """`fmt`'s component from `source`: a single file or a folder."""
    quiet()
    if source.is_file:
        return guarded(fmt.what, source, lambda: _from_file(fmt, source, placement))
    return guarded(fmt.what, source, lambda: _from_folder(fmt, source, placement))


def _from_file(fmt: ModelFormat, source: Source, placement: PlacementLike) -> nn.Module:
    shapes = weight_shapes(read_view(source.path, source.view))
    if not fmt.recognize(shapes):
        raise RunFailed(f"{source.path} is not a {fmt.title}")
    config = fmt.infer_config(shapes)
    device = str(home_device(placement))
    raw = with_file_markers(
        load_safetensors_view(source.path, source.view, device)
        if source.view
        else load_safetensors(source.path, device),
        source.path,
        source.view,
    )
    compute = torch_dtype(placement.dtype)
    weights, file_scales = split_scales(dequantize_comfy_layers(raw, dequantized_dtype(placement)))
    converted = convert_scaled(
        weights,
        file_scales,
        lambda sd: cast(dict[str, torch.Tensor], fmt.convert(dict(sd), config)),
        compute,
    )
    state = converted.state
    library = module(fmt.library)
    if fmt.config_class is not None:  # transformers: built by its own loader, buffers included
        model_config = getattr(library, fmt.config_class)(**config)
        with torch.device("meta"):
            shell = cast(nn.Module, getattr(library, fmt.class_name)(model_config))
        expected = set(shell.state_dict())
        _check_keys(fmt, source, sorted(expected - set(state)), sorted(set(state) - expected))
        scales = _layer_scales(shell, converted, placement, fmt)
        stored = _stored_only(state, placement, fmt)
        model = cast(
            nn.Module,
            getattr(library, fmt.class_name).from_pretrained(
                None,
                config=model_config,
                state_dict={
                    k: _stand_in(v, compute) if k in stored else v for k, v in state.items()
                },
                dtype=compute if stored else load_dtype(placement),
            ),
        )
        _assign_stored(model, stored)
        return place(model, placement, scales, fmt)
    # Parameters on the meta device (no random initialisation); buffers a module computes at
    # init and keeps out of its state dict (e.g. rope tables) are made for real.
    with module("accelerate").init_empty_weights(include_buffers=False):
        model = cast(nn.Module, getattr(library, fmt.class_name).from_config(config))
    scales = _layer_scales(model, converted, placement, fmt)
    _check_keys(fmt, source, *assign_state(model, state))
    return place(model, placement, scales, fmt)


def _layer_scales(
    model: nn.Module, converted: Converted, placement: PlacementLike, fmt: ModelFormat
) -> dict[str, torch.Tensor]:
    """The scale of each linear layer whose scaled fp8 weight stays stored, by layer name; every
    other scaled weight is multiplied out in `converted.state`, in the compute dtype."""
    kept = placement.storage is not None and placement.storage != placement.dtype
    compute = torch_dtype(placement.dtype)
    layers = dict(named_layers(model))
    scales: dict[str, torch.Tensor] = {}
    for key, scale in converted.scales.items():
        name, _dot, param = key.rpartition(".")
        linear = type(layers.get(name)) is nn.Linear and param == "weight"
        if kept and linear and not fmt.computes_at_load(name):
            scales[name] = scale
        else:
            converted.state[key] = dequantize(converted.state[key], scale, compute)
    return scales


def dequantized_dtype(placement: PlacementLike) -> torch.dtype:
    """The dtype NVFP4 and int8 layers dequantize to: the one a part is kept in where its layers
    cast from it (a compute-dtype copy is what the policy declined), else the compute dtype (fp8
    is only stored; a mixed file's fp8 layers keep a part so)."""
    kept = placement.storage
    if kept is not None and torch_dtype(kept) not in FP8:
        return torch_dtype(kept)
    return torch_dtype(placement.dtype)


def _stored_only(
    state: dict[str, torch.Tensor], placement: PlacementLike, fmt: ModelFormat
) -> dict[str, torch.Tensor]:
    """The fp8 tensors of a state kept so: transformers' loader would round the rest of a
    part's numbers to fp8 if asked for it, so such a part loads in the compute dtype and these
    are put back after."""
    if placement.storage is None or torch_dtype(placement.storage) not in FP8:
        return {}
    return {
        k: v
        for k, v in state.items()
        if v.dtype in FP8 and not fmt.computes_at_load(k.rpartition(".")[0])
    }


def _stand_in(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A tensor of `tensor`'s shape in `dtype` that holds no memory (one element, expanded): the
    loader keeps it as the parameter, where a cast of the fp8 tensor would be a copy (a real
    Qwen2.5-VL-7B's: 15 GiB at once), until `_assign_stored` puts the fp8 one in its place."""
    return torch.zeros((), dtype=dtype, device=tensor.device).expand(tensor.shape)


def _assign_stored(model: nn.Module, stored: Mapping[str, torch.Tensor]) -> None:
    """Put the stored fp8 tensors back in place of the copies the loader made of them."""
    for key, tensor in stored.items():
        name, _dot, param = key.rpartition(".")
        layer = model.get_submodule(name)
        if isinstance(getattr(layer, param, None), nn.Parameter):
            setattr(layer, param, nn.Parameter(tensor, requires_grad=False))


def _from_folder(fmt: ModelFormat, source: Source, placement: PlacementLike) -> nn.Module:
    library = module(fmt.library)
    model_class: Any = getattr(library, fmt.folder_loader, None)
    if fmt.folder_loader == "from_pretrained" or model_class is None:
        model_class = getattr(library, fmt.class_name)
    model = cast(
        nn.Module,
        model_class.from_pretrained(
            str(source.path),
            subfolder=source.subfolder or ("" if fmt.library == "transformers" else None),
            local_files_only=True,
            dtype=load_dtype(placement),
        ),
    )
    return place(model, placement)


def _check_keys(
    fmt: ModelFormat, source: Source, missing: list[str], unexpected: list[str]
) -> None:
    if missing or unexpected:
        raise RunFailed(
            f"the {fmt.what} {source.location} does not match its inferred architecture "
            f"(missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})"
        )


def load_tokenizer(source: Source, *, chat_template: bool = False) -> Any:
    """An HF tokenizer from a local folder; `chat_template` says whether the family needs one."""
    quiet()

    def load() -> Any:
        tokenizer = module("transformers").AutoTokenizer.from_pretrained(
            str(source.path), subfolder=source.subfolder or "", local_files_only=True
        )
        if chat_template and not getattr(tokenizer, "chat_template", None):
            raise RunFailed(f"the tokenizer in {source.location} has no chat template")
        return tokenizer

    return guarded("tokenizer", source, load)


def load_scheduler_config(source: Source | None, default: Mapping[str, Any]) -> dict[str, Any]:
    """A diffusers folder's scheduler config, or the family's `default` without one."""
    if source is None:
        return dict(default)

    def load() -> dict[str, Any]:
        data: object = json.loads((source.location / "scheduler_config.json").read_text("utf-8"))
        if not isinstance(data, dict):
            raise RunFailed(f"{source.location / 'scheduler_config.json'} is not a JSON object")
        return dict(cast(dict[str, Any], data))

    return guarded("scheduler config", source, load)
